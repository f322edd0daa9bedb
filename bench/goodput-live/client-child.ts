/**
 * The client's process (forked by run.ts): builds the slice's requests itself (the same
 * deterministic bodies run.ts scores), replays them open loop against the target it is sent, and
 * answers with what it measured. One command at a time over IPC.
 */
import { replay, type ReplayResult, type ScheduledRequest, type Target } from "./client.ts";
import { loadSlice, objectiveMs, type LiveRequest, type SliceOptions } from "./workload.ts";

export interface ReplayCommand {
  target: Target;
  slice: SliceOptions;
  /** Wall ms per trace ms: the request at trace time t is sent at t / speed. */
  speed: number;
  /** For each request's give-up time: its objective (the fleet's configured rate and time factor)... */
  prefillRate: number;
  timeFactor: number;
  /** ...times this, and at least this many ms. */
  giveUpFactor: number;
  giveUpMinMs: number;
}

let cached: { key: string; requests: LiveRequest[] } | undefined;

function slice(o: SliceOptions): LiveRequest[] {
  const key = JSON.stringify(o);
  if (cached?.key !== key) cached = { key, requests: loadSlice(o) };
  return cached.requests;
}

process.on("message", (cmd: ReplayCommand) => {
  const schedule: ScheduledRequest[] = slice(cmd.slice).map((r) => ({
    id: r.id,
    dueMs: r.arrivalMs / cmd.speed,
    body: r.body,
    giveUpMs: Math.max(cmd.giveUpMinMs, cmd.giveUpFactor * objectiveMs(r.promptTokens, cmd.prefillRate, cmd.timeFactor)),
  }));
  replay(cmd.target, schedule).then(
    (result: ReplayResult) => process.send!({ ok: true, result }),
    (e: unknown) => process.send!({ ok: false, error: e instanceof Error ? (e.stack ?? e.message) : String(e) }),
  );
});
