/**
 * A request's time-to-first-token objective (docs/ADMISSION.md): what "in time" means for it.
 *
 * Default: `max(objectiveMinMs, objectivePrefillFactor x its cold prefill)`, the cold prefill being
 * its whole prompt at the region's learned prefill rate, so a chat turn is expected within a
 * second and a long document within a multiple of what computing it from scratch costs, whatever
 * is cached. A tenant may configure its own (`tenants[].ttft_objective_ms`), and a request may ask
 * for a tighter one (`x-warmpath-ttft-objective-ms`), never a looser one than its tenant's: a
 * client cannot buy a longer hold in the queue than its tenant was given.
 */
import { MAX_OBJECTIVE_MS, type RouteRequest } from "../../contracts/routing.ts";
import type { AdmissionSettings } from "./admission-settings.ts";

/** The objective in ms for a request of `promptTokens` at `prefillRate` tokens/s. */
export function objectiveMs(
  req: Pick<RouteRequest, "promptTokens" | "objectiveMs" | "requestObjectiveMs">,
  prefillRate: number,
  settings: AdmissionSettings,
): number {
  const coldMs = (req.promptTokens * 1000) / Math.max(1e-9, prefillRate);
  const base = req.objectiveMs ?? Math.max(settings.objectiveMinMs, settings.objectivePrefillFactor * coldMs);
  const asked = req.requestObjectiveMs ?? Infinity;
  return Math.min(MAX_OBJECTIVE_MS, Math.max(1, Math.round(Math.min(base, asked))));
}
