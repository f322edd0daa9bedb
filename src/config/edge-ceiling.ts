/**
 * The edge's request ceiling (the `RATE_LIMITER` binding, Cloudflare's Rate Limiting), derived from
 * the configuration rather than written by hand: a backstop for tenants with a configured
 * `rate_limits.requests_per_minute`, checked before the body is read or any region object is asked,
 * so a flood from one key costs one counter check.
 *
 * The exact budgets are the region objects' (src/core/region/rate-budget.ts), one per region the
 * tenant may use. The binding counts per Cloudflare location and eventually, and has one limit for
 * every key, so it is set at {@link EDGE_CEILING_FACTOR} times the most any limited tenant may be
 * granted in a minute over all its regions: it trips only on a tenant sending at least twice its
 * whole budget through one location, never on a tenant within its limits. A tenant without a
 * configured limit is not counted at all (its normal load must never meet a ceiling it was not
 * given: a trace replayed at 30 requests a second from one key met the fixed 1,200 a minute this
 * replaces 826 times in 3,993 requests). No tenant limited: no binding is generated.
 */
import type { WarmpathConfig } from "./schema.ts";

/** How far above the largest budget the ceiling sits. */
const EDGE_CEILING_FACTOR = 2;
/** The binding's period (Cloudflare allows 10 or 60 s). */
export const EDGE_CEILING_PERIOD_SECONDS = 60;

/** Requests a minute the edge lets one key through per location, or undefined when no tenant has a request limit. */
export function edgeCeilingPerMinute(config: Pick<WarmpathConfig, "regions" | "tenants">): number | undefined {
  let most: number | undefined;
  for (const t of config.tenants) {
    const rpm = t.rate_limits?.requests_per_minute;
    if (rpm === undefined) continue;
    const regions = t.regions?.length ?? config.regions.length;
    most = Math.max(most ?? 0, rpm * regions);
  }
  return most === undefined ? undefined : EDGE_CEILING_FACTOR * most;
}
