/**
 * What a request asks of admission (docs/ADMISSION.md), from its tenant's configuration and its
 * own headers: its priority class (`x-warmpath-priority`, at most the tenant's) and its
 * time-to-first-token objective (`x-warmpath-ttft-objective-ms`, applied by the region at most
 * the tenant's). A bad header is a 400 naming it; a class above the tenant's is a 403: both say
 * which header, never what it held.
 */
import { MAX_OBJECTIVE_MS, PRIORITY_CLASSES, type PriorityClass } from "../contracts/routing.ts";
import { HINT } from "../contracts/headers.ts";
import type { TenantConfig } from "../config/schema.ts";
import { ApiError } from "../http/errors.ts";
import { classRank } from "../core/region/admission-queue.ts";

export interface AdmissionAsk {
  priority: PriorityClass;
  /** The tenant's configured objective (ms), if any. */
  tenantObjectiveMs: number | undefined;
  /** The request's own (ms), if it asked. */
  requestObjectiveMs: number | undefined;
}

/** An objective header: whole milliseconds, 1 to an hour (digits only: no sign, exponent or fraction). */
const OBJECTIVE_PATTERN = /^[0-9]{1,7}$/;

export function admissionAsk(request: Request, tenant: Pick<TenantConfig, "priority" | "ttft_objective_ms">): AdmissionAsk {
  const own = tenant.priority;
  let priority: PriorityClass = own;
  const asked = request.headers.get(HINT.priority);
  if (asked !== null) {
    const value = asked.trim().toLowerCase();
    if (!(PRIORITY_CLASSES as readonly string[]).includes(value)) {
      throw ApiError.invalidRequest(`x-warmpath-priority must be one of ${PRIORITY_CLASSES.join(", ")}`, HINT.priority, "invalid_priority");
    }
    priority = value as PriorityClass;
    if (classRank(priority) < classRank(own)) {
      throw ApiError.permission(
        "priority_not_allowed",
        `This API key may not use a class above ${own} (x-warmpath-priority)`,
        HINT.priority,
      );
    }
  }
  let requestObjectiveMs: number | undefined;
  const objective = request.headers.get(HINT.objective);
  if (objective !== null) {
    const v = objective.trim();
    const ms = OBJECTIVE_PATTERN.test(v) ? Number(v) : NaN;
    if (!(ms >= 1 && ms <= MAX_OBJECTIVE_MS)) {
      throw ApiError.invalidRequest(
        `x-warmpath-ttft-objective-ms must be a whole number of milliseconds from 1 to ${MAX_OBJECTIVE_MS}`,
        HINT.objective,
        "invalid_ttft_objective",
      );
    }
    requestObjectiveMs = ms;
  }
  return { priority, tenantObjectiveMs: tenant.ttft_objective_ms, requestObjectiveMs };
}
