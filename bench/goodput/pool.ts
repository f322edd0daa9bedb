/**
 * The goodput benchmark's runs as tasks, run in this thread (`jobs` 1) or spread over worker
 * threads. Every run is deterministic and independent of the others, and results are returned in
 * task order, so the output does not depend on the number of jobs.
 */
import { Worker, isMainThread, parentPort } from "node:worker_threads";
import type { FleetConfig } from "../fleet.ts";
import type { Workload } from "../workloads/types.ts";
import { goodputWorkload, runOne } from "./harness.ts";
import type { GoodputRun } from "./metrics.ts";
import type { RouterEntry } from "./routers.ts";

export interface WorkloadRef {
  name: string;
  quick: boolean;
  trace: string;
  rateFactor?: Record<string, number>;
  /** When the rate factor starts (s; generator.ts MixOptions.rateFactorFromSeconds) [0]. */
  rateFactorFromSeconds?: number;
  /** The mix's length (s) [its own]. */
  durationSeconds?: number;
  /** The mix's tenants' seeds shifted by this [0] (generator.ts MixOptions.seedOffset). */
  seedOffset?: number;
}

export interface RunTask {
  workload: WorkloadRef;
  load: number;
  /** The arrival-rate multiplier of 1x. */
  capacity: number;
  fleet: FleetConfig;
  entry: Pick<RouterEntry, "name" | "spec">;
  variant: string;
  /** Keep each request's outcome (for warmpath's per-request comparisons). */
  keepOutcomes: boolean;
  /** Measure only the requests that arrived from this time on (s, trace time) [0: all]. */
  fromSeconds?: number;
}

const cache = new Map<string, Workload>();

/** A workload, loaded once per thread. */
export function workloadOf(ref: WorkloadRef): Workload {
  const key = JSON.stringify([
    ref.name,
    ref.quick,
    ref.trace,
    ref.rateFactor ?? {},
    ref.rateFactorFromSeconds ?? 0,
    ref.durationSeconds ?? 0,
    ref.seedOffset ?? 0,
  ]);
  let w = cache.get(key);
  if (!w) {
    w = goodputWorkload(ref.name, {
      quick: ref.quick,
      trace: ref.trace,
      rateFactor: ref.rateFactor,
      rateFactorFromSeconds: ref.rateFactorFromSeconds,
      durationSeconds: ref.durationSeconds,
      seedOffset: ref.seedOffset,
    });
    cache.set(key, w);
  }
  return w;
}

export function runTask(t: RunTask): GoodputRun {
  return runOne(workloadOf(t.workload), t.load, t.capacity, t.fleet, t.entry, t.variant, t.keepOutcomes, (t.fromSeconds ?? 0) * 1000);
}

/** Runs `tasks` on `jobs` threads; `done` is told of each result as it comes. Results in task order. */
export async function runTasks(
  tasks: RunTask[],
  jobs: number,
  done: (t: RunTask, r: GoodputRun) => void = () => {},
): Promise<GoodputRun[]> {
  const out = new Array<GoodputRun>(tasks.length);
  if (jobs <= 1 || tasks.length <= 1) {
    tasks.forEach((t, i) => {
      out[i] = runTask(t);
      done(t, out[i]);
    });
    return out;
  }
  let next = 0;
  const workers = Array.from({ length: Math.min(jobs, tasks.length) }, () => new Worker(new URL(import.meta.url)));
  try {
    await Promise.all(
      workers.map(
        (w) =>
          new Promise<void>((resolve, reject) => {
            let current = -1;
            const feed = () => {
              if (next >= tasks.length) {
                resolve();
                return;
              }
              current = next++;
              w.postMessage(tasks[current]);
            };
            w.on("message", (r: GoodputRun) => {
              out[current] = r;
              done(tasks[current]!, r);
              feed();
            });
            w.on("error", reject);
            w.on("exit", (code) => {
              if (code !== 0) reject(new Error(`goodput worker exited with ${code}`));
            });
            feed();
          }),
      ),
    );
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return out;
}

if (!isMainThread && parentPort) {
  const port = parentPort;
  port.on("message", (t: RunTask) => port.postMessage(runTask(t)));
}
