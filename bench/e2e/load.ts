/**
 * The end-to-end benchmark's load generator: tiny chat requests, sent open-loop at a given rate
 * (or one at a time), timed from the moment the request is written to the first byte of the
 * response body and to its end, as a client sees them.
 *
 * It runs in a process of its own (load-child.ts), apart from the simulated fleet: the fleet's
 * nodes answer every request on both paths, and in the same event loop their work would delay the
 * client's timestamps. Each target (the router's public port, the user worker's own port, the
 * nodes) has its own keep-alive agent with the same settings, so both paths reuse warm connections
 * and neither pays a connection setup the other does not.
 */
import http from "node:http";
import { seededRandom } from "../../src/core/random.ts";
import { percentileOf } from "../../src/core/stats.ts";

export const MODEL = "llama-3.1-8b-instruct";

/** One kind of request, sent to one target. */
export interface Variant {
  /** e.g. "router json": the row label in the results. */
  label: string;
  method: "GET" | "POST";
  /** Base URLs, used in turn (the direct path spreads its requests over the nodes as the router does). */
  urls: string[];
  path: string;
  /** API keys used in turn (router only; empty: no Authorization header). */
  keys: string[];
  body: "none" | "json" | "stream";
  /** The keep-alive pool: one per target, so paths never share connections. */
  agent: string;
}

export type LoadCommand =
  | {
      type: "open";
      /** Requests per second of each variant (Poisson arrivals, the variants interleaved in shuffled cycles). */
      ratePerVariant: number;
      durationMs: number;
      variants: Variant[];
      /** Requests in flight per agent past which an arrival is shed (counted, never sent). */
      maxInflightPerAgent: number;
      timeoutMs: number;
      seed: number;
    }
  | {
      type: "sequential";
      /** Requests of each variant, one at a time, the variants in a shuffled order each round. */
      count: number;
      variants: Variant[];
      timeoutMs: number;
      seed: number;
    };

export interface VariantResult {
  label: string;
  sent: number;
  ok: number;
  /** Failures by kind: `http-429`, `timeout`, `connection`, `bad-body`, `shed`... */
  errors: Record<string, number>;
  /** Milliseconds from writing the request to the first body byte, per successful request. */
  ttfb: number[];
  /** Milliseconds from writing the request to the end of the body, per successful request. */
  total: number[];
  /** When the first request was written and the last one ended (ms, relative to the step's start). */
  firstSendMs: number;
  lastEndMs: number;
}

export interface StepResult {
  variants: VariantResult[];
  wallMs: number;
  /** How late the generator wrote requests relative to their scheduled time (open-loop only), ms. */
  lagP50Ms: number;
  lagP99Ms: number;
}

const SYSTEM_PROMPT =
  "You are a terse assistant. This conversation measures the router's own latency over calling a node directly, " +
  "so answer in as few tokens as you can and never ask a question back.";

/**
 * A chat request of a few hundred characters with max_tokens 1. Each request's user turn is its
 * own (numbered), so the router indexes a new prefix each time as it would for fresh traffic; the
 * direct path gets byte-identical bodies from the same numbering.
 */
export function chatBody(seq: number, stream: boolean): string {
  const user = `Request ${seq}: reply with the single word "ok". ` + "Padding to a realistic small prompt. ".repeat(3);
  return JSON.stringify({
    model: MODEL,
    max_tokens: 1,
    stream,
    messages: [
      { role: "system", content: SYSTEM_PROMPT },
      { role: "user", content: user },
    ],
  });
}

interface Outcome {
  ok: boolean;
  error?: string;
  ttfb: number;
  total: number;
  end: number;
}

export class LoadGenerator {
  private readonly agents = new Map<string, http.Agent>();
  private readonly inflight = new Map<string, number>();
  private seq = 0;
  private readonly turn = new Map<string, number>();

  private readonly maxSockets: number;

  constructor(maxSockets: number) {
    this.maxSockets = maxSockets;
  }

  private agent(name: string): http.Agent {
    let agent = this.agents.get(name);
    if (!agent) {
      agent = new http.Agent({ keepAlive: true, maxSockets: this.maxSockets, maxFreeSockets: this.maxSockets });
      this.agents.set(name, agent);
    }
    return agent;
  }

  /** The next of a variant's rotating values (URL, API key). */
  private next<T>(v: Variant, what: string, list: T[]): T | undefined {
    const key = `${v.label}/${what}`;
    const i = this.turn.get(key) ?? 0;
    this.turn.set(key, i + 1);
    return list[i % list.length];
  }

  /** Sends one request and times it from the write to the first body byte and to the end. */
  private send(v: Variant, t0ref: number, timeoutMs: number): Promise<Outcome> {
    const url = this.next(v, "url", v.urls)!;
    const key = this.next(v, "key", v.keys);
    const body = v.body === "none" ? undefined : chatBody(this.seq++, v.body === "stream");
    const headers: Record<string, string> = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (key !== undefined) headers.authorization = `Bearer ${key}`;
    this.inflight.set(v.agent, (this.inflight.get(v.agent) ?? 0) + 1);
    return new Promise<Outcome>((resolve) => {
      let settled = false;
      let firstByte = NaN;
      let text = "";
      const started = performance.now();
      const done = (ok: boolean, error?: string) => {
        if (settled) return;
        settled = true;
        this.inflight.set(v.agent, this.inflight.get(v.agent)! - 1);
        const end = performance.now();
        resolve({ ok, error, ttfb: firstByte - started, total: end - started, end: end - t0ref });
      };
      const req = http.request(url + v.path, { method: v.method, agent: this.agent(v.agent), headers }, (res) => {
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          if (Number.isNaN(firstByte)) firstByte = performance.now();
          // Only the tail is needed to check the answer is complete; bodies are a few hundred bytes.
          text = (text + chunk).slice(-256);
        });
        res.on("end", () => {
          if (res.statusCode !== 200) return done(false, `http-${res.statusCode}`);
          // A GET may answer with no body at all (a node's /health): its first byte is then its end.
          if (Number.isNaN(firstByte)) {
            if (v.body !== "none") return done(false, "empty-body");
            firstByte = performance.now();
          }
          const complete =
            v.body === "stream" ? text.trimEnd().endsWith("data: [DONE]") : v.body === "json" ? text.trimEnd().endsWith("}") : true;
          done(complete, complete ? undefined : "bad-body");
        });
        res.on("error", () => done(false, "connection"));
      });
      req.setTimeout(timeoutMs, () => {
        req.destroy();
        done(false, "timeout");
      });
      req.on("error", () => done(false, "connection"));
      req.end(body);
    });
  }

  async run(cmd: LoadCommand): Promise<StepResult> {
    const results = new Map<string, VariantResult>(
      cmd.variants.map((v) => [
        v.label,
        { label: v.label, sent: 0, ok: 0, errors: {}, ttfb: [], total: [], firstSendMs: NaN, lastEndMs: 0 },
      ]),
    );
    const random = seededRandom(cmd.seed);
    const t0 = performance.now();
    const record = (v: Variant, o: Outcome) => {
      const r = results.get(v.label)!;
      r.lastEndMs = Math.max(r.lastEndMs, o.end);
      if (o.ok) {
        r.ok++;
        r.ttfb.push(o.ttfb);
        r.total.push(o.total);
      } else r.errors[o.error!] = (r.errors[o.error!] ?? 0) + 1;
    };
    const start = (v: Variant): Promise<void> => {
      const r = results.get(v.label)!;
      r.sent++;
      if (Number.isNaN(r.firstSendMs)) r.firstSendMs = performance.now() - t0;
      return this.send(v, t0, cmd.timeoutMs).then((o) => record(v, o));
    };
    // Each cycle sends every variant once, in a fresh random order: same counts, no fixed phase.
    let cycle: Variant[] = [];
    const nextVariant = (): Variant => {
      if (cycle.length === 0) {
        cycle = [...cmd.variants];
        for (let i = cycle.length - 1; i > 0; i--) {
          const j = Math.floor(random() * (i + 1));
          [cycle[i], cycle[j]] = [cycle[j]!, cycle[i]!];
        }
      }
      return cycle.pop()!;
    };

    const lags: number[] = [];
    if (cmd.type === "sequential") {
      for (let i = 0; i < cmd.count * cmd.variants.length; i++) await start(nextVariant());
    } else {
      const pending: Promise<void>[] = [];
      const totalRate = cmd.ratePerVariant * cmd.variants.length;
      const end = t0 + cmd.durationMs;
      let due = t0;
      await new Promise<void>((resolve) => {
        const tick = () => {
          const now = performance.now();
          // Every arrival already due is sent now (timers fire late by up to a millisecond or so).
          while (due <= now && due < end) {
            const v = nextVariant();
            lags.push(now - due);
            if ((this.inflight.get(v.agent) ?? 0) >= cmd.maxInflightPerAgent) {
              const r = results.get(v.label)!;
              r.sent++;
              r.errors.shed = (r.errors.shed ?? 0) + 1;
            } else pending.push(start(v));
            due += (-Math.log(1 - random()) / totalRate) * 1000;
          }
          if (due >= end) resolve();
          else setTimeout(tick, Math.max(0, due - performance.now()));
        };
        tick();
      });
      await Promise.all(pending);
    }
    return {
      variants: [...results.values()],
      wallMs: performance.now() - t0,
      lagP50Ms: percentileOf(lags, 0.5),
      lagP99Ms: percentileOf(lags, 0.99),
    };
  }
}
