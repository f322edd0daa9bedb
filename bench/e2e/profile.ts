/**
 * Where the router's JavaScript time goes: a V8 CPU profile of the user worker's isolate (which
 * also runs its Durable Objects), taken through wrangler dev's inspector proxy, with every sample
 * assigned to a stage of the request by the source module of its stack's frames.
 *
 * Why a profile: the worker and the region object run on one workerd thread, so the process's CPU
 * time cannot be split between them; the profile's samples can, by whether the stack passes through
 * the object's class (durable-objects/region.ts). What it cannot see is native work outside any JS
 * frame (HTTP parsing, the RPC plumbing between worker and object, sockets): V8 reports that as
 * "(program)", and it is shown as such. The profiler itself slows the isolate down, so the figures
 * are shares of the sampled time, not production costs.
 */
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Profiler } from "node:inspector";
import { percentile } from "../../src/core/stats.ts";

/** A Chrome DevTools Protocol session over WebSocket (Node's global WebSocket, from undici). */
export class Inspector {
  private id = 0;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  private readonly socket: WebSocket;

  private constructor(socket: WebSocket) {
    this.socket = socket;
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: { message: string } };
      // Events have no id. workerd answers some Profiler commands (enable, setSamplingInterval,
      // start) by sending the request back with no result; they take effect all the same (the
      // profile comes back at about the interval asked for), so the echo counts as the answer.
      const call = message.id === undefined ? undefined : this.pending.get(message.id);
      if (!call) return;
      this.pending.delete(message.id!);
      if (message.error) call.reject(new Error(message.error.message));
      else call.resolve(message.result);
    });
    socket.addEventListener("close", () => {
      for (const call of this.pending.values()) call.reject(new Error("inspector connection closed"));
      this.pending.clear();
    });
  }

  /**
   * Connects to wrangler dev's inspector proxy (`--inspector-port`). The proxy admits only
   * devtools-like clients: it wants an Origin header on a loopback host.
   */
  static async connect(inspectorPort: number): Promise<Inspector> {
    const targets = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json/list`)).json()) as Array<{ webSocketDebuggerUrl?: string }>;
    const url = targets.find((t) => t.webSocketDebuggerUrl)?.webSocketDebuggerUrl;
    if (!url) throw new Error(`no inspector target on port ${inspectorPort}`);
    const socket = new WebSocket(url, { headers: { Origin: "http://127.0.0.1" } });
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener("open", () => resolve(), { once: true });
      socket.addEventListener("error", () => reject(new Error(`cannot open the inspector at ${url}`)), { once: true });
    });
    return new Inspector(socket);
  }

  send<T>(method: string, params: Record<string, unknown> = {}, timeoutMs = 60_000): Promise<T> {
    const id = ++this.id;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`inspector: no answer to ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.socket.send(JSON.stringify({ id, method, params }));
    });
  }

  close(): void {
    this.socket.close();
  }
}

/**
 * Runs `work` with the CPU profiler on, asking for a sample every `intervalUs` microseconds. On a
 * busy machine the samples come further apart than asked (the sampler is a thread too), so the
 * report states the interval measured from the profile.
 */
export async function profileWhile(inspector: Inspector, intervalUs: number, work: () => Promise<void>): Promise<Profiler.Profile> {
  await inspector.send("Profiler.enable");
  await inspector.send("Profiler.setSamplingInterval", { interval: intervalUs });
  await inspector.send("Profiler.start");
  let failure: unknown;
  try {
    await work();
  } catch (e) {
    failure = e;
  }
  // Stopped even if the work failed: a profiler left running would slow every later step.
  const { profile } = await inspector.send<{ profile: Profiler.Profile }>("Profiler.stop");
  await inspector.send("Profiler.disable");
  if (failure !== undefined) throw failure;
  return profile;
}

/**
 * The worker bundle wrangler dev is serving: the newest `.wrangler/tmp/dev-*\/index.js` under the
 * project (wrangler writes it there before handing it to workerd), whose line numbers the
 * profile's frames refer to.
 */
export function devBundle(root: string): string {
  const tmp = join(root, ".wrangler", "tmp");
  const bundles = readdirSync(tmp)
    .filter((d) => d.startsWith("dev-"))
    .map((d) => join(tmp, d, "index.js"))
    .filter((f) => {
      try {
        return statSync(f).isFile();
      } catch {
        return false;
      }
    })
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  if (!bundles[0]) throw new Error(`no wrangler dev bundle under ${tmp}`);
  return readFileSync(bundles[0], "utf8");
}

/** The stages a sample is assigned to, in the order the report lists them. */
export const STAGES = [
  "Durable Object (route, firstByte, complete: zod, RegionRouter)",
  "decision log line (console.log)",
  "edge rate limiter (wrangler's local simulation)",
  "API key check + request bounds (middleware)",
  "Hono routing + context",
  "body read, UTF-8 check, JSON parse",
  "zod validation of the body (worker)",
  "canonicalise + hash the prompt",
  "dispatch (RPC calls to the object)",
  "node call to first byte (fetch)",
  "node:timers shim (first-byte timeout)",
  "response headers + completion (RPC to the object)",
  "relay + usage parsing",
  "other worker code",
  "wrangler dev middleware",
  "garbage collection",
  "(program): native work outside JS",
] as const;
export type Stage = (typeof STAGES)[number];

interface BundleMap {
  /** Source module of each bundle line (esbuild's `// path` comments). */
  moduleAt: (line: number) => string;
  /** The top-level declaration enclosing each line (closures count as their enclosing function). */
  topAt: (line: number) => string;
}

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

function bundleMap(source: string): BundleMap {
  const modules: Array<[number, string]> = [];
  const tops: Array<[number, string]> = [];
  source.split("\n").forEach((text, line) => {
    const m = /^\/\/ (\S+\.(?:[cm]?js|ts|mts))$/.exec(text);
    if (m) modules.push([line, m[1]!.replace(/^(\.\.\/)+/, "")]);
    const t = /^(?:async )?function\*? ?([\w$]+)\(|^var ([\w$]+) = /.exec(text);
    if (t) tops.push([line, (t[1] ?? t[2])!]);
  });
  return { moduleAt: (line) => startingAtOrBefore(modules, line), topAt: (line) => startingAtOrBefore(tops, line) };
}

/** The stage of one JS frame of the worker's bundle, by its module and enclosing declaration. */
function frameStage(module: string, top: string, fn: string): Stage | undefined {
  const base = top.replace(/\d+$/, "");
  if (module.includes("node_modules/zod/")) return "zod validation of the body (worker)";
  if (module.includes("node_modules/hono/")) return "Hono routing + context";
  if (module === "src/proxy/decision-log.ts") return "decision log line (console.log)";
  if (module === "src/edge/api/inference.ts" && base === "edgeCeiling") return "edge rate limiter (wrangler's local simulation)";
  if (module.startsWith("src/edge/middleware/") || module === "src/config/dev-credentials.ts")
    return "API key check + request bounds (middleware)";
  if (module === "src/http/body.ts" || module === "src/core/json-bounds.ts") return "body read, UTF-8 check, JSON parse";
  if (module === "src/edge/api/schemas.ts") return "zod validation of the body (worker)";
  if (/^src\/core\/(canonical|canonical-apis|prefix|hash|block-layout)\.ts$/.test(module)) return "canonicalise + hash the prompt";
  if (module === "src/region/dispatch.ts") {
    if (base === "callNode" || fn === "callNode") return "node call to first byte (fetch)";
    if (base === "respond" || fn === "respond") return "response headers + completion (RPC to the object)";
    return "dispatch (RPC calls to the object)";
  }
  if (/^src\/proxy\/(relay|stream-usage|usage|stream-end)\.ts$/.test(module)) return "relay + usage parsing";
  if (module.startsWith(".wrangler/") || module.includes("node_modules/wrangler/")) return "wrangler dev middleware";
  if (module.startsWith("src/") || module.startsWith("durable-objects/")) return "other worker code";
  return undefined;
}

export interface ProfileSummary {
  /** Share of the non-idle samples by stage (0..1). */
  share: Record<Stage, number>;
  /** Of the JS samples (stages other than GC and "(program)"), the object's share. */
  objectShare: number;
  /** Share of the non-idle samples that are JavaScript (not GC, not "(program)"). */
  jsShare: number;
  /** Non-idle samples, and per request. */
  samples: number;
  samplesPerRequest: number;
  /** Median gap between samples, µs. */
  medianIntervalUs: number;
  /** "other worker code" by innermost bundle module and top-level function, share of the non-idle samples. */
  otherModules: Record<string, number>;
}

/**
 * Assigns every sample to a stage. A sample whose stack passes through the object's class is the
 * object's, whatever it runs (its zod parse, RegionRouter); any other is assigned by its innermost
 * frame that belongs to the worker's bundle or a runtime module (a native leaf such as console.log
 * or fetch counts for the JS function that called it).
 *
 * Every sample counts as one: the gaps between samples are irregular (the thread also runs other
 * isolates, miniflare's entry worker and the local rate limiter, during which this isolate is not
 * sampled), and weighting a sample by the gap after it would hand those gaps to whatever ran last.
 */
export function summarise(profile: Profiler.Profile, requests: number, bundleSource: string): ProfileSummary {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // The bundle is the script most frames come from (workerd names it by its module name only).
  const urls = new Map<string, number>();
  for (const n of profile.nodes) if (n.callFrame.url.endsWith(".js")) urls.set(n.callFrame.url, (urls.get(n.callFrame.url) ?? 0) + 1);
  const bundleUrl = [...urls].sort((a, b) => b[1] - a[1])[0]?.[0];
  if (!bundleUrl) throw new Error("the profile has no frames of the worker's bundle");
  const map = bundleMap(bundleSource);

  const counts = new Map<number, number>();
  for (const nodeId of profile.samples ?? []) counts.set(nodeId, (counts.get(nodeId) ?? 0) + 1);

  const share = Object.fromEntries(STAGES.map((s) => [s, 0])) as Record<Stage, number>;
  const otherModules: Record<string, number> = {};
  let samples = 0;
  for (const [nodeId, n] of counts) {
    const name = nodes.get(nodeId)!.callFrame.functionName;
    if (name === "(idle)") continue;
    samples += n;
    let stage: Stage | undefined =
      name === "(garbage collector)"
        ? "garbage collection"
        : name === "(program)" || name === "(root)"
          ? "(program): native work outside JS"
          : undefined;
    if (!stage) {
      let inObject = false;
      let innermost: Stage | undefined;
      let innermostCode: string | undefined;
      for (let id: number | undefined = nodeId; id !== undefined; id = parent.get(id)) {
        const frame = nodes.get(id)!.callFrame;
        let frameStageFound: Stage | undefined;
        if (frame.url === bundleUrl) {
          const module = map.moduleAt(frame.lineNumber);
          innermostCode ??= `${module} ${map.topAt(frame.lineNumber)}`;
          if (module === "durable-objects/region.ts") inObject = true;
          frameStageFound = frameStage(module, map.topAt(frame.lineNumber), frame.functionName);
        } else if (frame.url.startsWith("node-internal:internal_timers")) frameStageFound = "node:timers shim (first-byte timeout)";
        else if (frame.url.includes("ratelimit")) frameStageFound = "edge rate limiter (wrangler's local simulation)";
        innermost ??= frameStageFound;
      }
      stage = inObject ? "Durable Object (route, firstByte, complete: zod, RegionRouter)" : (innermost ?? "other worker code");
      if (stage === "other worker code") {
        const where = innermostCode ?? `${name || "(anonymous)"} (runtime, no caller in the bundle)`;
        otherModules[where] = (otherModules[where] ?? 0) + n;
      }
    }
    share[stage] += n;
  }
  for (const s of STAGES) share[s] /= Math.max(1, samples);
  for (const k of Object.keys(otherModules)) otherModules[k]! /= Math.max(1, samples);
  const jsShare = 1 - share["garbage collection"] - share["(program): native work outside JS"];
  const deltas = (profile.timeDeltas ?? []).slice(1).sort((a, b) => a - b);
  return {
    share,
    objectShare: jsShare > 0 ? share["Durable Object (route, firstByte, complete: zod, RegionRouter)"] / jsShare : NaN,
    jsShare,
    samples,
    samplesPerRequest: samples / requests,
    medianIntervalUs: percentile(deltas, 0.5),
    otherModules,
  };
}
