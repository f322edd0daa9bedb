/**
 * The goodput benchmark's runs (bench/goodput.ts drives them; bench/test/goodput.test.ts runs a
 * slice): its workloads, the definition of 1x, the routers, the tuning of the anchors' opt-in
 * protections, and one run.
 */
import { simulate, type Dispatcher, type FleetConfig, type Live } from "../fleet.ts";
import { OracleDispatcher, PooledDispatcher, pooledFleet } from "../oracle.ts";
import { loadWorkload, DEFAULT_TRACE } from "../workloads/load.ts";
import { generateMix, MIX } from "../workloads/generator.ts";
import type { Workload } from "../workloads/types.ts";
import { buildRouter, type RouterEntry } from "./routers.ts";
import { smgDefaults, type SmgLimiterConfig } from "./smg-limiter.ts";
import { DYNAMO_DOC_EXAMPLE, type DynamoBusyConfig } from "./dynamo-busy.ts";
import { LLMD_ADMITTER_DEFAULTS } from "./llmd.ts";
import { goodputOf, outcomesOf, type GoodputRun } from "./metrics.ts";

export { DEFAULT_TRACE };

/** The workloads, in report order. */
export const GOODPUT_WORKLOADS = ["mooncake", "mix"] as const;

/** Duration of the mix's quick slice (s). */
const QUICK_MIX_SECONDS = 150;
/** Requests of the Mooncake trace's quick slice. */
const QUICK_MOONCAKE_REQUESTS = 3000;

/**
 * A workload by name. `mooncake` is the shared trace (its first 3,000 requests with `quick`);
 * `mix` the multi-tenant mix (150 s of it with `quick`), `rateFactor` flooding named tenants.
 */
export function goodputWorkload(
  name: string,
  opts: {
    trace?: string;
    quick?: boolean;
    rateFactor?: Record<string, number>;
    rateFactorFromSeconds?: number | undefined;
    /** The mix's length (s) [its own, 600; the quick slice's 150]. */
    durationSeconds?: number | undefined;
    seedOffset?: number | undefined;
  } = {},
): Workload {
  if (name === "mix") {
    return generateMix(MIX, {
      durationSeconds: opts.durationSeconds ?? (opts.quick ? QUICK_MIX_SECONDS : undefined),
      rateFactor: opts.rateFactor,
      rateFactorFromSeconds: opts.rateFactorFromSeconds,
      seedOffset: opts.seedOffset,
    });
  }
  if (name === "mooncake") {
    const w = loadWorkload("mooncake", { trace: opts.trace ?? DEFAULT_TRACE, quick: false });
    if (!opts.quick) return w;
    const requests = w.requests.slice(0, QUICK_MOONCAKE_REQUESTS);
    return { ...w, requests, description: `Mooncake conversation trace (first ${requests.length} requests)` };
  }
  throw new Error(`unknown goodput workload ${name} (mooncake, mix)`);
}

/**
 * 1x: the arrival-rate multiplier at which the greedy oracle (bench/oracle.ts: the fleet's 8
 * separate caches, placed knowing every cache, queue and true prefill time) keeps the fleet's
 * prefill 100% busy: the most load the fleet can serve, with a placement no router beats by
 * much. Found by bisection on the speed (the oracle's busy fraction grows with it: more arrivals,
 * and a little less cache as it spreads), without noise. Also the pooled reference's figure (the
 * fleet as one node with all the cache and all the rate: linear in the speed, as its hit rate
 * does not depend on it), for context: no placement of 8 nodes reaches it.
 */
export interface Capacity {
  /** The arrival-rate multiplier of 1x. */
  speed: number;
  /** The oracle's prefill busy fraction at that speed. */
  oracleBusy: number;
  /** Where the pooled reference would be 100% busy (context). */
  pooledSpeed: number;
  /** Each class's share of the prefill the oracle computes at 1x (tokens). */
  classShares: Record<string, number>;
}

export function capacitySpeed(w: Workload, fleet: FleetConfig): Capacity {
  const cfg = { ...fleet, noiseSigma: 0 };
  const busyAt = (speed: number, d: Dispatcher, c: FleetConfig): { busy: number; lives: Live[] } => {
    const { lives, fleet: f } = simulate(w.requests, speed, c, w.trueBlockTokens, d);
    const span = lives.length > 1 ? lives[lives.length - 1]!.arrival - lives[0]!.arrival : 1;
    return { busy: f.nodes.reduce((a, n) => a + n.prefillBusyMs, 0) / (f.nodes.length * span), lives };
  };
  const pooledSpeed = 1 / busyAt(1, new PooledDispatcher(), pooledFleet(cfg)).busy;
  // The oracle's busy fraction is within a few percent of the pooled one's below saturation: bracket around it.
  let lo = pooledSpeed / 4;
  let hi = pooledSpeed * 1.5;
  for (let i = 0; i < CAPACITY_BISECTIONS; i++) {
    const mid = Math.sqrt(lo * hi);
    if (busyAt(mid, new OracleDispatcher(), cfg).busy < 1) lo = mid;
    else hi = mid;
  }
  const speed = Number(Math.sqrt(lo * hi).toPrecision(4));
  const at = busyAt(speed, new OracleDispatcher(), cfg);
  const byClass = new Map<string, number>();
  let total = 0;
  for (const l of at.lives) {
    const c = l.req.priority ?? "standard";
    byClass.set(c, (byClass.get(c) ?? 0) + l.uncachedTokens);
    total += l.uncachedTokens;
  }
  const classShares = Object.fromEntries([...byClass].sort(([a], [b]) => (a < b ? -1 : 1)).map(([c, v]) => [c, v / total]));
  return { speed, oracleBusy: at.busy, pooledSpeed: Number(pooledSpeed.toPrecision(4)), classShares };
}

/** Bisection steps for 1x: the bracket (a factor of 6) shrinks to within 0.3%. */
const CAPACITY_BISECTIONS = 10;

/** The grids the anchors' protections are tuned over (bench/GOODPUT.md: "Tuning the opt-in protections"). */
export const SMG_GRID: SmgLimiterConfig[] = [16, 32, 64, 128, 256].flatMap((n) => [
  smgDefaults(n),
  { ...smgDefaults(n), refillPerSecond: 0 },
]);
export const DYNAMO_GRID: DynamoBusyConfig[] = [2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000].map((t) => ({
  activeDecodeBlocksThreshold: 0.85,
  activePrefillTokensThreshold: t,
}));
/** The loads the protections are tuned at: the targets'. */
export const TUNE_LOADS = [2, 3];

export function smgLabel(c: SmgLimiterConfig): string {
  return `N=${c.maxConcurrent}, refill ${c.refillPerSecond === c.maxConcurrent ? "N/s (default)" : `${c.refillPerSecond}/s`}`;
}

export function dynamoLabel(c: DynamoBusyConfig): string {
  return `decode ${c.activeDecodeBlocksThreshold}, prefill ${c.activePrefillTokensThreshold} tokens`;
}

/**
 * Each tenant's commitment as an operator who sold the fleet's capacity would configure it
 * (`committed_prompt_tokens_per_minute`): the prompt tokens a minute it sends at 1x (`speed`, the
 * capacity's arrival-rate multiplier), over the workload's span. The mix at 1x keeps the fleet's
 * prefill about fully busy, so the commitments add up to the fleet's capacity, with no headroom.
 */
export function commitmentsAt(w: Workload, speed: number): Record<string, number> {
  let span = 0;
  const tokens = new Map<string, number>();
  for (const r of w.requests) {
    span = Math.max(span, r.arrival);
    if (r.tenant !== undefined) tokens.set(r.tenant, (tokens.get(r.tenant) ?? 0) + r.promptTokens);
  }
  const minutes = span / speed / 60_000;
  return Object.fromEntries([...tokens].sort(([a], [b]) => a.localeCompare(b)).map(([t, n]) => [t, Math.max(1, Math.round(n / minutes))]));
}

/**
 * The routers compared on a workload; `tuned` are the protections' tuned configurations;
 * `commitments` (a workload of tenants) adds warmpath with each tenant committed its own rate.
 */
export function routerEntries(
  fleet: FleetConfig,
  hasClasses: boolean,
  tuned: { smg: SmgLimiterConfig; dynamo: DynamoBusyConfig },
  commitments?: Record<string, number>,
): RouterEntry[] {
  const engineSlots = fleet.nodes * fleet.slots;
  const out: RouterEntry[] = [
    {
      name: "warmpath",
      group: "warmpath",
      spec: { kind: "warmpath", admission: true, tellPlaces: true },
      description: `the production RegionRouter with DEFAULT_REGION_SETTINGS (admission by objective and the region queue on), each node's places stated (\`max_running_requests\` ${fleet.slots}, the engines' limit, as SMG's limit below is told it)`,
    },
    ...(commitments === undefined
      ? []
      : [
          {
            name: "warmpath-committed",
            group: "warmpath" as const,
            spec: { kind: "warmpath" as const, admission: true, commitments, tellPlaces: true },
            description:
              "the same with each tenant committed the prompt tokens a minute it sends at x1 (`committed_prompt_tokens_per_minute`; together the fleet's capacity)",
          },
        ]),
    {
      name: "warmpath-no-admission",
      group: "warmpath",
      spec: { kind: "warmpath", admission: false },
      description:
        "the same with admission off and the places not stated: what landed before (placement, the 30 s saturation bound, 256 in flight per node)",
    },
    {
      name: "sglang-cache-aware",
      group: "default",
      anchor: "smg",
      spec: { kind: "anchor", policy: "sglang-cache-aware" },
      description: "SGLang Model Gateway's cache-aware policy, its defaults: every request to a node",
    },
    {
      name: "dynamo-kv",
      group: "default",
      anchor: "dynamo",
      spec: { kind: "anchor", policy: "dynamo-kv" },
      description: "Dynamo's KV router cost, its defaults: every request to a node",
    },
    {
      name: "llm-d",
      group: "default",
      anchor: "llm-d",
      spec: { kind: "llmd" },
      description: "llm-d's endpoint picker, default profile (queue 2, KV utilisation 2, prefix 3): every request to a node",
    },
    {
      name: `smg-limit-${engineSlots}`,
      group: "protection",
      anchor: "smg",
      spec: { kind: "smg-limit", config: smgDefaults(engineSlots) },
      description: `SMG with --max-concurrent-requests ${engineSlots} (the fleet's engine slots), queue 100, timeout 60 s, refill N/s (its defaults)`,
    },
    {
      name: "smg-limit-tuned",
      group: "protection",
      anchor: "smg",
      spec: { kind: "smg-limit", config: tuned.smg },
      description: `SMG with --max-concurrent-requests tuned on this workload (${smgLabel(tuned.smg)}), queue 100, timeout 60 s`,
    },
    {
      name: "dynamo-busy-doc",
      group: "protection",
      anchor: "dynamo",
      spec: { kind: "dynamo-busy", config: DYNAMO_DOC_EXAMPLE },
      description: `Dynamo with its documented busy thresholds (${dynamoLabel(DYNAMO_DOC_EXAMPLE)}), 529 when all busy`,
    },
    {
      name: "dynamo-busy-tuned",
      group: "protection",
      anchor: "dynamo",
      spec: { kind: "dynamo-busy", config: tuned.dynamo },
      description: `Dynamo with busy thresholds tuned on this workload (${dynamoLabel(tuned.dynamo)}), 529 when all busy`,
    },
  ];
  if (hasClasses) {
    out.push({
      name: "llm-d-admitter",
      group: "protection",
      anchor: "llm-d",
      spec: { kind: "llmd", admitter: LLMD_ADMITTER_DEFAULTS },
      description: "llm-d with the probabilistic admitter, its defaults; batch sheddable (priority -1)",
    });
  }
  out.push(
    {
      name: "llm-d-admitter-all",
      group: "protection",
      anchor: "llm-d",
      spec: { kind: "llmd", admitter: { ...LLMD_ADMITTER_DEFAULTS, sheddable: "all" } },
      description:
        "llm-d with the probabilistic admitter, its defaults; every request sheddable (the only way it acts on one-class traffic)",
    },
    {
      name: "slo-oracle",
      group: "reference",
      spec: { kind: "slo-oracle" },
      description: "greedy oracle knowing the true caches, queues and prefill times; refuses at arrival what it predicts late",
    },
  );
  return out;
}

/**
 * bench:goodput's warmpath (its `warmpath` entry) under `name`, told its nodes' places or not:
 * bench:fleets and bench:places run it both ways.
 */
export function warmpathEntry(fleet: FleetConfig, name: string, tellPlaces: boolean): Pick<RouterEntry, "name" | "spec"> {
  const warmpath = routerEntries(fleet, false, { smg: SMG_GRID[0]!, dynamo: DYNAMO_GRID[0]! }).find((e) => e.name === "warmpath")!;
  if (warmpath.spec.kind !== "warmpath") throw new Error("warmpath's entry is not warmpath's");
  return { name, spec: { ...warmpath.spec, tellPlaces } };
}

/** One run: `w` at `load` (x `capacity` arrival rate) through `entry`. */
export function runOne(
  w: Workload,
  load: number,
  capacity: number,
  fleet: FleetConfig,
  entry: Pick<RouterEntry, "name" | "spec">,
  variant = "",
  keepOutcomes = false,
  fromMs = 0,
): GoodputRun {
  const t0 = performance.now();
  const speed = load * capacity;
  const d = buildRouter(entry.name, entry.spec, fleet.prefillRate);
  const simulated = simulate(w.requests, speed, fleet, w.trueBlockTokens, d);
  const f = simulated.fleet;
  // Measured over the requests that arrived from `fromMs` (trace time) on: the flood's window.
  const lives = fromMs > 0 ? simulated.lives.filter((l) => l.req.arrival >= fromMs) : simulated.lives;
  const run = goodputOf(lives, f, {
    workload: w.name,
    load,
    speed,
    noise: fleet.noiseSigma,
    router: entry.name,
    variant,
    wallMs: performance.now() - t0,
  });
  if (keepOutcomes) run.outcomes = outcomesOf(lives);
  return run;
}

/** The tuning runs' routers: every configuration of each grid, named by its label. */
export function tuningEntries(): Array<Pick<RouterEntry, "name" | "spec"> & { anchor: "smg" | "dynamo" }> {
  return [
    ...SMG_GRID.map((c) => ({
      name: `smg-limit (${smgLabel(c)})`,
      anchor: "smg" as const,
      spec: { kind: "smg-limit" as const, config: c },
    })),
    ...DYNAMO_GRID.map((c) => ({
      name: `dynamo-busy (${dynamoLabel(c)})`,
      anchor: "dynamo" as const,
      spec: { kind: "dynamo-busy" as const, config: c },
    })),
  ];
}

/**
 * The anchors' protections tuned on a workload without noise: the configuration of each grid with
 * the best mean goodput over the tuning loads (first in grid order on a tie). An operator could
 * only tune on a load test; tuning on the very runs scored gives the anchors more than that.
 */
export function pickTuned(runs: readonly GoodputRun[]): { smg: SmgLimiterConfig; dynamo: DynamoBusyConfig; scores: Map<string, number> } {
  const scores = new Map<string, number>();
  for (const e of tuningEntries()) {
    const mine = runs.filter((r) => r.router === e.name);
    if (mine.length === 0) continue;
    scores.set(e.name, mine.reduce((a, r) => a + r.all.goodput, 0) / mine.length);
  }
  const best = <C extends object>(grid: C[], label: (c: C) => string, prefix: string): C => {
    let out = grid[0]!;
    let top = -1;
    for (const c of grid) {
      const v = scores.get(`${prefix} (${label(c)})`) ?? -1;
      if (v > top) {
        top = v;
        out = c;
      }
    }
    return out;
  };
  return { smg: best(SMG_GRID, smgLabel, "smg-limit"), dynamo: best(DYNAMO_GRID, dynamoLabel, "dynamo-busy"), scores };
}
