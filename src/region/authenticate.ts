/**
 * The region worker's door (docs/SECURITY.md, "The internal boundary"): every message under
 * `/region/v1/` must be signed by a holder of the internal secret (src/core/internal-auth.ts), as
 * the edge (every path but `spend`) or as a region worker (`spend`: the budget ledger's batches,
 * sent by region objects through their BUDGET_LEDGER binding), before anything reads it further.
 *
 * A refused message is 401 (no valid signature: none, malformed, wrong secret, no secret here) or
 * 403 (signed, but expired, replayed or from the wrong role), in OpenAI's error shape, marked with
 * {@link AUTH_REFUSAL_HEADER} so the edge tells it from the region's own answers; it is counted by
 * failure in this isolate ({@link authRefusalTotals}, the region worker's GET /metrics) and in
 * Analytics Engine, and logged once (at most {@link LINES_PER_SECOND} lines a second per failure,
 * the rest in a summary line); the header's value and the secrets are never logged or echoed.
 */
import { AUTH_REFUSAL_HEADER, failureStatus, type AuthFailure, type InternalRole } from "../core/internal-auth.ts";
import { verifyInternalRequest } from "../http/internal-auth.ts";

export { AUTH_REFUSAL_HEADER };
/** Log lines a second per failure kind and isolate; past it, one `internal_auth_suppressed` line a second says how many. */
export const LINES_PER_SECOND = 20;

const totals = new Map<AuthFailure, number>();
let window = { start: 0, lines: new Map<AuthFailure, number>(), suppressed: new Map<AuthFailure, number>() };

/** This isolate's refusals since it started, by failure. */
function authRefusalTotals(): ReadonlyMap<AuthFailure, number> {
  return totals;
}

/** Who must have made a message to this path: region workers for the budget ledger's batches, else the edge. */
export function expectedRole(path: string): InternalRole {
  return /^\/region\/v1\/[^/]+\/spend$/.test(path) ? "region" : "edge";
}

const MESSAGES: Record<AuthFailure, string> = {
  missing: "This service takes only messages signed by the edge (x-warmpath-internal-auth); none was given",
  malformed: "The message's signature header is not a valid signature",
  "bad-signature": "The message's signature does not match",
  "no-secret": "This region worker has no internal secret to verify messages with",
  expired: "The message's timestamp is outside the accepted clock skew",
  replayed: "The message was already received",
  "wrong-role": "The message was signed by a sender that may not send it",
};

function record(failure: AuthFailure, status: number, request: Request, problem: string | undefined, env: unknown, now: number): void {
  totals.set(failure, (totals.get(failure) ?? 0) + 1);
  if (now - window.start >= 1000) {
    if (window.suppressed.size) {
      console.error(
        JSON.stringify({ event: "internal_auth_suppressed", window_ms: now - window.start, counts: Object.fromEntries(window.suppressed) }),
      );
    }
    window = { start: now, lines: new Map(), suppressed: new Map() };
  }
  const logged = window.lines.get(failure) ?? 0;
  if (logged < LINES_PER_SECOND) {
    window.lines.set(failure, logged + 1);
    const path = new URL(request.url).pathname;
    console.error(
      JSON.stringify({
        event: "internal_auth_refused",
        failure,
        status,
        method: request.method.slice(0, 16),
        path: path.slice(0, 200),
        ...(problem ? { problem } : {}),
      }),
    );
  } else window.suppressed.set(failure, (window.suppressed.get(failure) ?? 0) + 1);
  try {
    const dataset = (env as { ANALYTICS?: AnalyticsEngineDataset }).ANALYTICS;
    // Positions as the edge's refusal points (src/edge/middleware/refusal-log.ts): blob5 "refused", blob6 the code.
    dataset?.writeDataPoint({
      indexes: [""],
      blobs: ["", "", "", "", "refused", `internal_auth_${failure}`, ""],
      doubles: [status, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0],
    });
  } catch {
    // A metric never fails the answer.
  }
}

/** The refusal of a message that is not the edge's (or a region worker's spend batch). */
function authRefusal(failure: AuthFailure, headers: Record<string, string>): Response {
  const status = failureStatus(failure);
  return Response.json(
    {
      error: {
        message: MESSAGES[failure],
        type: status === 401 ? "authentication_error" : "permission_error",
        code: `internal_auth_${failure.replace(/-/g, "_")}`,
        param: null,
      },
    },
    { status, headers: { ...headers, [AUTH_REFUSAL_HEADER]: failure } },
  );
}

/** Verifies a message whose body was read (`body`): undefined if it may go on, else the refusal to answer. */
export async function authenticate(
  env: unknown,
  request: Request,
  body: Uint8Array,
  now: number,
  headers: Record<string, string>,
): Promise<Response | undefined> {
  const result = await verifyInternalRequest(env, request, body, expectedRole(new URL(request.url).pathname), now);
  if (result.ok) return undefined;
  record(result.failure, failureStatus(result.failure), request, result.problem, env, now);
  return authRefusal(result.failure, headers);
}

/** The region worker's GET /metrics: its isolate's refusals, in Prometheus' text format. */
export function authMetricsText(): string {
  const lines = [
    "# HELP warmpath_region_internal_auth_refusals_total Messages this region worker isolate refused at the internal boundary (unsigned, forged, expired, replayed, wrong sender), by failure.",
    "# TYPE warmpath_region_internal_auth_refusals_total counter",
  ];
  for (const [failure, count] of totals) lines.push(`warmpath_region_internal_auth_refusals_total{failure="${failure}"} ${count}`);
  return lines.join("\n") + "\n";
}
