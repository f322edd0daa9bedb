/**
 * Which tenants are flooding (docs/ADMISSION.md): one that sent more than SHARE_TOLERANCE over its
 * weighted share of the recent prefill of the tenants active in the region (two at least) loses its
 * class while it does: it is queued as batch, the lowest. Classes are ordered before tenants in the
 * region's queue, so without this an interactive tenant's flood took every node from the standard
 * and batch tenants (bench/GOODPUT.md, the mix at 1x with one interactive tenant at five times its
 * rate: the others kept about 30% of their goodput). One class lower was not enough: the standard
 * tenants recovered, but the flood still outranked the batch tenant (41% of its goodput). As batch,
 * its excess competes with the batch tenants by weight, and the flood absorbs its own shedding. Same tolerance as the fair share's bound
 * (fair-share.ts): two tenants sending alike hold 40% or 60% by the luck of arrival, and must not
 * demote each other.
 */
import { SHARE_TOLERANCE } from "./fair-share.ts";
import { DEMAND_TAU_MS } from "./class-reserve.ts";

/** Tenants tracked per region (the configuration's, with room to spare); idle ones are forgotten first. */
const MAX_TENANTS = 1_024;

interface Demand {
  tokens: number;
  at: number;
  weight: number;
}

export class TenantDemand {
  private readonly tenants = new Map<string, Demand>();

  /** A request of `tenant` (of `weight`) arrived, costing `tokens` of uncached prefill. */
  arrived(tenant: string, weight: number, tokens: number, now: number): void {
    let d = this.tenants.get(tenant);
    if (!d) {
      if (this.tenants.size >= MAX_TENANTS) this.forgetIdle(now);
      if (this.tenants.size >= MAX_TENANTS) return;
      this.tenants.set(tenant, (d = { tokens: 0, at: now, weight }));
    }
    d.tokens = decayed(d, now) + tokens;
    d.at = now;
    d.weight = weight;
  }

  /** Whether `tenant` sent more than SHARE_TOLERANCE over its weighted share of the active tenants' recent prefill. */
  overShare(tenant: string, now: number): boolean {
    const own = this.tenants.get(tenant);
    if (!own) return false;
    let total = 0;
    let weights = 0;
    let active = 0;
    for (const d of this.tenants.values()) {
      if (now - d.at > DEMAND_TAU_MS) continue;
      total += decayed(d, now);
      weights += d.weight;
      active++;
    }
    if (active < 2 || total <= 0) return false;
    return decayed(own, now) > (1 + SHARE_TOLERANCE) * (own.weight / weights) * total;
  }

  private forgetIdle(now: number): void {
    for (const [k, d] of this.tenants) if (now - d.at > DEMAND_TAU_MS) this.tenants.delete(k);
  }
}

function decayed(d: Demand, now: number): number {
  return d.tokens * Math.exp(-Math.max(0, now - d.at) / DEMAND_TAU_MS);
}
