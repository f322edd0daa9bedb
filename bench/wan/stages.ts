/**
 * Where the router's CPU goes, per stage of a request: a V8 CPU profile of every user worker's
 * isolate in the one-process workerd (the edge and each region's worker, whose isolate also runs
 * its Durable Object), each sample assigned to a stage by the source module of its stack's frames
 * (the bundles' esbuild `// path` comments), then scaled to the CPU per request measured without
 * the profiler.
 *
 * Why a profile: the edge, the region worker and the object run on one workerd thread, so the
 * process's CPU time cannot be split between stages; the samples can. What no JS frame covers
 * (HTTP parsing, the stream pumps between isolates, the RPC plumbing, sockets) V8 reports as
 * "(program)"; it is shown as the runtime's native share. Every sample counts as one: the gaps
 * between samples are irregular (the thread also runs the other isolates), and weighting a sample
 * by the gap after it would hand those gaps to whatever ran last. The profiler slows the isolates,
 * so a stage's figure is its share of the sampled time times the unprofiled CPU: an estimate, not
 * a stopwatch.
 */
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Profiler } from "node:inspector";
import { parse as parseToml } from "smol-toml";

/** The stages, in the order a request meets them. */
export const STAGES = [
  "edge: HTTP, Hono, API key, bounds",
  "edge: body read, JSON parse, validation",
  "edge: canonicalise + hash the prompt",
  "internal boundary: HMAC sign + verify",
  "service binding: dispatch encode/decode, edge and region handlers",
  "object call: route session (route, firstByte, complete)",
  "node call setup (body, headers, fetch)",
  "relay: stream and SSE events (edge guard, relay, seam)",
  "logging + tracing (decision line, spans)",
  "other JavaScript",
  "garbage collection",
  "runtime native (streams, sockets, RPC plumbing)",
] as const;
export type Stage = (typeof STAGES)[number];

/** The stage of a frame of a worker's bundle, by its source module and function; undefined: its caller's. */
export function moduleStage(module: string): Stage | undefined {
  if (module.startsWith("durable-objects/") || module.startsWith("src/core/region/") || module.startsWith("src/core/policies/"))
    return "object call: route session (route, firstByte, complete)";
  if (/^src\/region\/(place|ask|settle|bill)\.ts$/.test(module)) return "object call: route session (route, firstByte, complete)";
  if (/^src\/core\/(canonical|canonical-apis|prefix|hash|block-layout)\.ts$/.test(module)) return "edge: canonicalise + hash the prompt";
  if (module === "src/core/internal-auth.ts" || module === "src/http/internal-auth.ts" || module === "src/region/authenticate.ts")
    return "internal boundary: HMAC sign + verify";
  if (
    module === "src/http/body.ts" ||
    module === "src/http/json-errors.ts" ||
    module === "src/core/json-bounds.ts" ||
    module === "src/edge/api/schemas.ts"
  )
    return "edge: body read, JSON parse, validation";
  if (
    /^src\/proxy\/(decision-log|spans|cf-tracing|log-limit)\.ts$/.test(module) ||
    /^src\/(edge|region)\/trace\.ts$/.test(module) ||
    module === "src/core/trace-context.ts" ||
    module === "src/region/sinks.ts" ||
    module.startsWith("src/edge/middleware/trace") ||
    module.startsWith("src/edge/middleware/refusal-log")
  )
    return "logging + tracing (decision line, spans)";
  if (
    /^src\/proxy\/(relay|event-filter|read-clock|answer-tail|sse-events|stream-usage|usage|usage-check|stream-end)\.ts$/.test(module) ||
    module === "src/region/seam.ts" ||
    module === "src/region/continue.ts" ||
    module === "src/edge/guard-stream.ts"
  )
    return "relay: stream and SSE events (edge guard, relay, seam)";
  if (
    /^src\/region\/(call-node|node-body|cache-salt|continuation-body|respond|stateless)\.ts$/.test(module) ||
    /^src\/proxy\/(body-fields|node-error|rate-limit-headers)\.ts$/.test(module)
  )
    return "node call setup (body, headers, fetch)";
  if (
    module === "src/edge/forward.ts" ||
    module === "src/edge/region-client.ts" ||
    module === "src/contracts/region-service.ts" ||
    /^src\/region\/(app|dispatch|context|index)\.ts$/.test(module)
  )
    return "service binding: dispatch encode/decode, edge and region handlers";
  if (
    module.includes("node_modules/hono/") ||
    module.startsWith("src/edge/middleware/") ||
    /^src\/edge\/(app|index)\.ts$/.test(module) ||
    module === "src/config/dev-credentials.ts"
  )
    return "edge: HTTP, Hono, API key, bounds";
  return undefined;
}

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The name of the last entry of `table` (lines ascending) starting at or before `line`, or "": a binary search. */
export function startingAtOrBefore(table: ReadonlyArray<readonly [number, string]>, line: number): string {
  let lo = 0;
  let hi = table.length - 1;
  let found = "";
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (table[mid]![0] <= line) {
      found = table[mid]![1];
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

/**
 * A bundle's module comment as a path in the project (`src/edge/app.ts`) or a package's
 * (`node_modules/hono/...`): esbuild writes it relative to the bundle's folder, which is outside
 * the project (a temporary folder), and node_modules may be a symlink to another checkout.
 */
function projectPath(comment: string): string {
  const at = comment.lastIndexOf("node_modules/");
  if (at >= 0) return comment.slice(at);
  const absolute = resolve("/", comment.replace(/^(\.\.\/)+/, ""));
  if (absolute.startsWith(ROOT + "/")) return absolute.slice(ROOT.length + 1);
  // Another checkout of the project (a worktree): from its last top-level source folder.
  const top = Math.max(absolute.lastIndexOf("/src/"), absolute.lastIndexOf("/durable-objects/"));
  return top >= 0 ? absolute.slice(top + 1) : absolute;
}

/** Source module of each line of a bundle (esbuild's `// path` comments). */
function moduleMap(source: string): (line: number) => string {
  const starts: Array<[number, string]> = [];
  source.split("\n").forEach((text, line) => {
    const m = /^\/\/ (\S+\.(?:[cm]?js|ts|mts))$/.exec(text);
    if (m) starts.push([line, projectPath(m[1]!)]);
  });
  return (line) => startingAtOrBefore(starts, line);
}

/**
 * Samples per stage of one isolate's profile. A sample goes to the innermost frame of its stack
 * that names a stage; zod's frames go to their caller's stage (the edge's body validation, the
 * object's contract checks); a sample with no such frame is "other JavaScript"; console.log's
 * native work counts for the code that logged.
 */
export function stageSamples(profile: Profiler.Profile, bundleSource: string): Record<Stage, number> {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const urls = new Map<string, number>();
  for (const n of profile.nodes) if (n.callFrame.url.endsWith(".js")) urls.set(n.callFrame.url, (urls.get(n.callFrame.url) ?? 0) + 1);
  const bundleUrl = [...urls].sort((a, b) => b[1] - a[1])[0]?.[0];
  const moduleAt = moduleMap(bundleSource);
  const out = Object.fromEntries(STAGES.map((s) => [s, 0])) as Record<Stage, number>;
  const stageOfNode = new Map<number, Stage>();
  for (const id of profile.samples ?? []) {
    const name = nodes.get(id)!.callFrame.functionName;
    if (name === "(idle)") continue;
    let stage: Stage | undefined =
      name === "(garbage collector)"
        ? "garbage collection"
        : name === "(program)" || name === "(root)"
          ? "runtime native (streams, sockets, RPC plumbing)"
          : stageOfNode.get(id);
    if (!stage) {
      for (let at: number | undefined = id; at !== undefined && !stage; at = parent.get(at)) {
        const frame = nodes.get(at)!.callFrame;
        if (frame.url === bundleUrl) stage = moduleStage(moduleAt(frame.lineNumber));
      }
      stage ??= "other JavaScript";
      stageOfNode.set(id, stage);
    }
    out[stage]++;
  }
  return out;
}

/** A Chrome DevTools Protocol session with one isolate (Node's global WebSocket). */
class Session {
  private id = 0;
  private readonly pending = new Map<number, (v: unknown) => void>();
  private readonly socket: WebSocket;
  constructor(socket: WebSocket) {
    this.socket = socket;
    socket.addEventListener("message", (event) => {
      const m = JSON.parse(String(event.data)) as { id?: number; result?: unknown };
      // workerd answers some Profiler commands by echoing the request without a result: still the answer.
      const done = m.id === undefined ? undefined : this.pending.get(m.id);
      if (done) {
        this.pending.delete(m.id!);
        done(m.result);
      }
    });
  }
  static async open(url: string): Promise<Session> {
    const socket = new WebSocket(url, { headers: { Origin: "http://127.0.0.1" } } as unknown as string[]);
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener("open", () => resolve(), { once: true });
      socket.addEventListener("error", () => reject(new Error(`cannot open the inspector at ${url}`)), { once: true });
    });
    return new Session(socket);
  }
  send<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = ++this.id;
    return new Promise<T>((resolve) => {
      this.pending.set(id, resolve as (v: unknown) => void);
      this.socket.send(JSON.stringify({ id, method, params }));
    });
  }
  close(): void {
    this.socket.close();
  }
}

/** A worker's name as its configuration gives it (generated TOML or JSON). */
function configName(file: string): string {
  const text = readFileSync(file, "utf8");
  return ((file.endsWith(".json") ? JSON.parse(text) : parseToml(text)) as { name: string }).name;
}

/**
 * Profiles every user worker of a workerd-host process (scripts/workerd-host.ts, given by its
 * arguments: `--inspector-port`, `--persist-to`, `--config`) while `work` runs, and returns the
 * samples per stage summed over the isolates.
 */
export async function profileStages(
  hostArgs: readonly string[],
  intervalUs: number,
  work: () => Promise<void>,
): Promise<Record<Stage, number>> {
  const arg = (name: string) => hostArgs[hostArgs.indexOf(name) + 1]!;
  const configs = hostArgs.flatMap((a, i) => (hostArgs[i - 1] === "--config" ? [a] : []));
  // workerd-host bundles the i-th configuration into <persist-to>/bundle/<i>/index.js.
  const bundles = new Map(configs.map((c, i) => [configName(c), readFileSync(`${arg("--persist-to")}/bundle/${i}/index.js`, "utf8")]));
  const targets = (await (await fetch(`http://127.0.0.1:${arg("--inspector-port")}/json/list`)).json()) as Array<{
    title: string;
    webSocketDebuggerUrl: string;
  }>;
  const sessions: Array<{ name: string; session: Session }> = [];
  for (const t of targets) {
    const name = /core:user:(.+)$/.exec(t.title)?.[1];
    if (name && bundles.has(name)) sessions.push({ name, session: await Session.open(t.webSocketDebuggerUrl) });
  }
  for (const { session } of sessions) {
    await session.send("Profiler.enable");
    await session.send("Profiler.setSamplingInterval", { interval: intervalUs });
    await session.send("Profiler.start");
  }
  const total = Object.fromEntries(STAGES.map((s) => [s, 0])) as Record<Stage, number>;
  try {
    await work();
  } finally {
    // Stopped even if the work failed: a profiler left running would slow every later step.
    for (const { name, session } of sessions) {
      const { profile } = await session.send<{ profile: Profiler.Profile }>("Profiler.stop");
      await session.send("Profiler.disable");
      session.close();
      const counts = stageSamples(profile, bundles.get(name)!);
      for (const s of STAGES) total[s] += counts[s];
    }
  }
  return total;
}
