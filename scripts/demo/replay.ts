/**
 * The replay schedule: the workload is sent open loop at its arrival times, so that load does not
 * adapt to the router's speed, yet a conversation's next turn waits for the previous answer as a
 * user would, and at most `concurrency` requests are in flight. Tenants map onto the development
 * API keys and regions here.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { DEV_API_KEY, DEV_API_KEY_2 } from "../../src/config/dev-credentials.ts";
import type { Workload } from "../workload.ts";
import { sendRequest, type RequestResult } from "./send-request.ts";

/** The development tenants' API keys (wrangler.toml): tenant t of the workload uses key t mod 2. */
export const DEV_API_KEYS = [DEV_API_KEY, DEV_API_KEY_2] as const;

/** A FIFO counting semaphore. */
class Semaphore {
  private free: number;
  private readonly waiting: Array<() => void> = [];
  constructor(n: number) {
    this.free = n;
  }
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

/**
 * Replays the workload against a running system at `url`. `regions` maps tenants to regions
 * (tenant t goes to regions[floor(t / 2) % regions.length], with key t % 2).
 */
export async function replay(
  url: string,
  workload: Workload,
  options: { timeFactor: number; concurrency: number; regions: readonly string[]; progress?: (line: string) => void },
): Promise<RequestResult[]> {
  const { timeFactor, concurrency, regions } = options;
  const slots = new Semaphore(concurrency);
  const finished = new Map<number, Promise<void>>();
  const results: RequestResult[] = new Array(workload.requests.length);
  const start = performance.now();
  let completed = 0;
  const tasks = workload.requests.map((r) => {
    const task = (async () => {
      const due = start + r.at / timeFactor;
      await sleep(Math.max(0, due - performance.now()));
      if (r.previous !== undefined) await finished.get(r.previous);
      await slots.acquire();
      const delayMs = performance.now() - due;
      const headers: Record<string, string> = {
        authorization: `Bearer ${DEV_API_KEYS[r.tenant % DEV_API_KEYS.length]}`,
        "x-session-id": r.user,
        "x-warmpath-region": regions[Math.floor(r.tenant / DEV_API_KEYS.length) % regions.length]!,
      };
      try {
        const m = await sendRequest(url, r, headers);
        results[r.id] = { id: r.id, tenant: r.tenant, user: r.user, turn: r.turn, delayMs, ...m };
      } finally {
        slots.release();
      }
      if (++completed % 100 === 0) options.progress?.(`  ${completed}/${workload.requests.length} requests`);
    })();
    finished.set(r.id, task);
    return task;
  });
  await Promise.all(tasks);
  return results;
}
