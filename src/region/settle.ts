/**
 * Settling a placement: every request the region placed on a node ends with exactly one settlement
 * of that node's part, whatever ended it (an answer, a failure before the first byte, a refused
 * continuation, a client that went, an error of this worker's own). Placed by the region's object,
 * its session is completed with the outcome, which releases the node's load and the budget's hold
 * and bills what the answer carried; placed statelessly (stateless.ts), the worker's own count of
 * the node's requests is taken back. A part left unsettled is counted in flight by the object
 * until its ticket's timeout (600 s by default), so every path that ends a part calls here.
 */
import type { CompletionOutcome, RouteSessionApi } from "../contracts/region-object.ts";
import type { Placed } from "./call-node.ts";
import type { RegionContext } from "./context.ts";
import { countStateless } from "./stateless.ts";

/** A lost completion only delays the load model's correction (the ticket expires); log it. */
const logBookkeepingError = (e: unknown) => console.error(JSON.stringify({ event: "region_bookkeeping_error", message: String(e) }));

/**
 * A call to the region's object whose answer nothing waits for (a first byte, a remembered
 * response, a queued request left): kept alive by the request's `waitUntil`, an error logged.
 */
export function inBackground(rc: RegionContext, call: unknown): void {
  rc.ctx.waitUntil(Promise.resolve(call).then(() => {}, logBookkeepingError));
}

/**
 * Settles `placed`'s part with `outcome`: its session completed (in the background, kept alive by
 * the request's `waitUntil`, an error logged), or its stateless count taken back. Resolves true
 * when the object took the completion, false when it did not (no session, or the call failed: a
 * restarted object) so that the caller can bill another way (respond.ts).
 */
export function settlePlacement(
  rc: RegionContext,
  placed: Pick<Placed, "nodeId">,
  session: RouteSessionApi | undefined,
  outcome: CompletionOutcome,
): Promise<boolean> {
  if (!session) {
    countStateless(rc.region.config.name, placed.nodeId, -1);
    return Promise.resolve(false);
  }
  // Called now, not in a later microtask: a retry's next `route` must reach the object after the
  // failed node's completion, as the calls were made.
  let call: Promise<unknown>;
  try {
    call = Promise.resolve(session.complete(outcome));
  } catch (e) {
    call = Promise.reject(e);
  }
  const completed = call.then(
    () => true,
    (e: unknown) => (logBookkeepingError(e), false),
  );
  rc.ctx.waitUntil(completed);
  return completed;
}

/**
 * `step`'s result; if it throws (an error of this worker's, not the node's), the placement is
 * settled first: as a request that ended unanswered (`cancelled`: no node is blamed, nothing
 * billed, its hold released), and the node's body, if one was being read, let go. Then the error
 * goes on (the worker answers 500).
 */
export async function settledIfThrown<T>(
  rc: RegionContext,
  placed: Placed,
  session: RouteSessionApi | undefined,
  step: () => Promise<T> | T,
  reader?: ReadableStreamDefaultReader<Uint8Array>,
): Promise<T> {
  try {
    return await step();
  } catch (e) {
    void reader?.cancel(e).catch(() => {});
    void settlePlacement(rc, placed, session, { status: "cancelled" });
    throw e;
  }
}
