/**
 * The comparison itself: for each policy, a freshly booted system (scripts/system.ts: empty
 * caches, empty Durable Object store) with that policy in every region, the workload replayed
 * through it, the nodes' figures collected, and the system stopped. Also keeps track of the system
 * that is up, so that an interrupted or crashing demo does not leave wrangler dev behind.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { startSystem, type System } from "../system.ts";
import { generateWorkload, type WorkloadOptions } from "../workload.ts";
import { adminStateWhenRecorded } from "./admin-state.ts";
import { decodeStretch, harnessVerdict, type HarnessVerdict } from "./harness.ts";
import { DEMO_POLICIES, devConfigWithPolicy, regionNames } from "./policy-config.ts";
import { replay } from "./replay.ts";
import { summarize, type PolicyResult } from "./summarize.ts";

export interface DemoOptions {
  /** Workload knobs (scripts/workload.ts); unset ones take DEFAULT_WORKLOAD's values. */
  workload?: Partial<WorkloadOptions>;
  /** Divides every fleet duration and the arrival schedule. Default 5. */
  timeFactor?: number;
  /** Most requests in flight at once. Default 64. */
  concurrency?: number;
  /** Policies to compare, in order. Default sticky, then warmpath. */
  policies?: readonly string[];
  /** Fleet file. Default fleet/fleet.default.json. */
  fleetFile?: string;
  /** Every region's configured prefill rate (tokens per wall-clock second). Default: wrangler.toml's. */
  prefillRate?: number;
  /** Progress lines (stderr in the CLI). */
  progress?: (line: string) => void;
  /** wrangler dev's output lines (the CLI's --verbose). */
  routerOutput?: (line: string) => void;
}

export interface DemoResult {
  timeFactor: number;
  /** The fleet file the runs used (--fleet), as given. */
  fleetFile: string;
  concurrency: number;
  workload: WorkloadOptions;
  conversations: number;
  promptTokensOffered: number;
  policies: PolicyResult[];
  /** Whether the run's timings hold (harness.ts): the CLI prints no comparison when they do not. */
  verdict: HarnessVerdict;
}

/** The system currently up, so that an interrupted demo still tears it down. */
let current: System | undefined;

/**
 * Last resort if this process dies with a system up (an uncaught error, a closed pipe): wrangler
 * runs in its own process group, so it would outlive us. `exit` handlers must be synchronous.
 */
function killCurrentSync(): void {
  const pid = current?.router.pid;
  if (pid === undefined || current?.router.exitCode !== null) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/** Stops the system currently up, if any (SIGINT/SIGTERM in the CLI). */
export async function stopCurrent(): Promise<void> {
  const system = current;
  current = undefined;
  await system?.stop();
}

/** Runs the workload once per policy, each on a freshly booted system. */
export async function runDemo(options: DemoOptions = {}): Promise<DemoResult> {
  const timeFactor = options.timeFactor ?? 5;
  const concurrency = options.concurrency ?? 64;
  const policies = options.policies ?? DEMO_POLICIES;
  const progress = options.progress ?? (() => {});
  const workload = generateWorkload(options.workload);
  const offered = workload.requests.reduce((n, r) => n + r.body.messages.reduce((m, x) => m + x.content.length, 0), 0) / 4;
  progress(
    `workload: ${workload.requests.length} requests, ${workload.conversations} conversations, ${workload.options.tenants} tenants, ` +
      `~${Math.round(offered / 1000)}k prompt tokens over ${(workload.requests.at(-1)!.at / 1000 / timeFactor).toFixed(1)} s (time factor ${timeFactor})`,
  );
  const out: PolicyResult[] = [];
  for (const policy of policies) {
    const config = devConfigWithPolicy(policy, options.prefillRate, timeFactor);
    progress(`[${policy}] booting the router and the fleet (policy = "${policy}" in every region)...`);
    const system = await startSystem({
      port: 0,
      config,
      timeFactorScale: timeFactor,
      fleetFile: options.fleetFile,
      onRouterOutput: options.routerOutput,
    });
    current = system;
    process.on("exit", killCurrentSync);
    try {
      progress(`[${policy}] replaying...`);
      const loop = monitorEventLoopDelay({ resolution: 10 });
      loop.enable();
      const started = performance.now();
      const results = await replay(system.url, workload, { timeFactor, concurrency, regions: regionNames(config), progress });
      const wallSeconds = (performance.now() - started) / 1000;
      loop.disable();
      // Each simulated node's modelled wall ms between two tokens, the harness's yardstick.
      const intervals = new Map(
        (system.fleet?.nodes ?? []).map((n) => [
          `${n.region}/${n.id}`,
          1000 / n.engine.options.decodeTokensPerSecond / n.engine.options.timeFactor,
        ]),
      );
      const health = {
        eventLoopDelayP99Ms: loop.percentile(99) / 1e6,
        harness: decodeStretch(results, (node) => intervals.get(node)),
      };
      const state = await adminStateWhenRecorded(system.url, results.filter((r) => r.ok).length);
      const summary = summarize(policy, results, state, wallSeconds, health);
      progress(
        `[${policy}] done in ${wallSeconds.toFixed(1)} s: hit rate ${(summary.hitRate * 100).toFixed(1)}%, ${summary.errors} errors`,
      );
      out.push(summary);
    } finally {
      process.off("exit", killCurrentSync);
      // Unless an interrupt (stopCurrent) is already stopping it.
      if (current === system) {
        current = undefined;
        await system.stop();
      }
    }
  }
  return {
    timeFactor,
    fleetFile: options.fleetFile ?? "fleet/fleet.default.json",
    concurrency,
    workload: workload.options,
    conversations: workload.conversations,
    promptTokensOffered: offered,
    policies: out,
    verdict: harnessVerdict(
      out.map((p) => ({ policy: p.policy, stretch: p.harness })),
      timeFactor,
    ),
  };
}
