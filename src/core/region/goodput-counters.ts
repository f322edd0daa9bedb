/**
 * What admission did, counted for the operator (docs/ADMISSION.md, docs/OBSERVABILITY.md): per
 * class and per tenant, the answers whose first byte came within their objective, those that came
 * late, and the requests shed and why; per class, the time spent in the region's queue. Goodput is
 * `within / (within + late + shed)`. The first byte is the region object's (its clock, from the
 * request's arrival at the object to the node's first byte reaching its worker): the long haul to
 * the client is not in it. Kept apart from the routing state: nothing here influences a decision.
 */
import { PRIORITY_CLASSES, type Demotion, type PriorityClass, type ShedReason } from "../../contracts/routing.ts";

/** Tenants counted (the configuration's tenants, with room to spare): as the ledger's tenant counters. */
const MAX_TENANTS = 1_024;

interface ClassCounters {
  placed: number;
  within: number;
  late: number;
  shed: Record<ShedReason, number>;
  /** Requests placed after waiting in the queue, and their summed wait (ms). */
  queued: number;
  queuedMs: number;
}

interface TenantGoodput {
  within: number;
  late: number;
  shed: number;
  /** Requests ranked below the class they asked for at arrival: its tenant flooded (`share`) or was past its commitment. */
  demoted: Record<Demotion, number>;
}

export interface GoodputCounters {
  classes: Record<PriorityClass, ClassCounters>;
  tenants: Record<string, TenantGoodput>;
}

const emptyClass = (): ClassCounters => ({
  placed: 0,
  within: 0,
  late: 0,
  shed: { objective: 0, deadline: 0, "queue-full": 0 },
  queued: 0,
  queuedMs: 0,
});

export class Goodput {
  private readonly classes = Object.fromEntries(PRIORITY_CLASSES.map((c) => [c, emptyClass()])) as Record<PriorityClass, ClassCounters>;
  private readonly tenants = new Map<string, TenantGoodput>();

  placed(priority: PriorityClass, queuedMs: number): void {
    const c = this.classes[priority];
    c.placed++;
    if (queuedMs > 0) {
      c.queued++;
      c.queuedMs += queuedMs;
    }
  }

  /** A placed request's first byte, `ttftMs` after it reached the region: within its objective or late. */
  firstByte(priority: PriorityClass, tenant: string, ttftMs: number, objectiveMs: number): void {
    const within = ttftMs <= objectiveMs;
    this.classes[priority][within ? "within" : "late"]++;
    const t = this.tenant(tenant);
    if (t) t[within ? "within" : "late"]++;
  }

  /** A request of `tenant` was ranked below the class it asked for (tenant-demand.ts). */
  demoted(tenant: string, why: Demotion): void {
    const t = this.tenant(tenant);
    if (t) t.demoted[why]++;
  }

  shed(priority: PriorityClass, tenant: string, why: ShedReason): void {
    this.classes[priority].shed[why]++;
    const t = this.tenant(tenant);
    if (t) t.shed++;
  }

  counters(): GoodputCounters {
    return {
      classes: structuredClone(this.classes),
      tenants: Object.fromEntries([...this.tenants].map(([k, v]) => [k, { ...v, demoted: { ...v.demoted } }])),
    };
  }

  private tenant(key: string): TenantGoodput | undefined {
    let t = this.tenants.get(key);
    if (!t && this.tenants.size < MAX_TENANTS)
      this.tenants.set(key, (t = { within: 0, late: 0, shed: 0, demoted: { share: 0, commitment: 0, growth: 0 } }));
    return t;
  }
}
