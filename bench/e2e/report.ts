/**
 * Renders the end-to-end benchmark's figures as bench/e2e/RESULTS.md. Every number in the file
 * comes from the run it reports; the prose around them only says how they were taken and what
 * each column means, and the summary sentences are computed from the tables.
 */
import { STAGES, type ProfileSummary } from "./profile.ts";

/** Added latency the router is held to, p50 on loopback (project issue 13). */
export const TARGET_ADDED_P50_MS = 2;
/** A step saturates the router when it answers under this share of the offered rate... */
const SATURATED_ACHIEVED = 0.9;
/** ...or fails more than this share of its requests (errors, timeouts, shed). */
const SATURATED_ERRORS = 0.01;

export interface PathLatency {
  ttfb50: number;
  ttfb99: number;
  end50: number;
  end99: number;
}

export interface StepRow {
  label: string;
  /** Router requests/s offered (the direct path is offered as many); undefined: one at a time. */
  offered: number | undefined;
  achievedRouter: number;
  achievedDirect: number;
  sentRouter: number;
  sentDirect: number;
  errorsRouter: Record<string, number>;
  errorsDirect: Record<string, number>;
  latency: Array<{ kind: "json" | "stream"; router: PathLatency; direct: PathLatency }>;
  /** CPU ms per request the router answered, by process role (user, proxy, wrangler, fleet, client). */
  cpuPerRouterRequest: Record<string, number>;
  answered: number;
  otherCores: number;
  lagP99Ms: number;
  /** The worker's own timings from its decision lines (whole milliseconds). */
  worker: { lines: number; firstByte50: number; duration50: number; duration99: number } | undefined;
}

export interface BlockRow {
  label: string;
  requests: number;
  errors: number;
  end50: number;
  end99: number;
  cpuPerRequest: Record<string, number>;
  otherCores: number;
  workerFirstByte50: number | undefined;
  workerDuration50: number | undefined;
}

export interface Report {
  quick: boolean;
  command: string;
  started: string;
  machine: {
    cpu: string;
    cores: number;
    memoryGiB: number;
    kernel: string;
    node: string;
    wrangler: string;
    workerd: string;
    commit: string;
    dirty: boolean;
  };
  loadAverageStart: number[];
  /** CPU other processes used just before the run (cores). */
  otherCoresAtStart: number;
  loadAverageEnd: number[];
  durationS: number;
  plan: {
    warmup: number;
    sequential: number;
    rates: number[];
    stepMs: number;
    blockRounds: number;
    blockSize: number;
    profileRequests: number;
    tenants: number;
    nodes: number;
    maxInflight: number;
  };
  idle: Record<string, number>;
  sequential: StepRow;
  steps: StepRow[];
  blocks: BlockRow[];
  profile: (ProfileSummary & { requests: number; userCpuPerRequest: number; intervalUs: number }) | undefined;
  logOff: { sequential: StepRow; step: StepRow; compareLabel: string } | undefined;
  /**
   * The same router in workerd without wrangler dev (scripts/workerd-host.ts): one-at-a-time
   * rounds, `sequential` the median one by added p50 on a non-streamed request.
   */
  workerd: { sequential: StepRow; rounds: StepRow[]; step: StepRow; compareLabel: string } | undefined;
  routerEvents: Record<string, number>;
  /** Steps during which wrangler replaced a measured process (their CPU figure for it is omitted). */
  restarts: string[];
}

/** Whether the router fell behind the offered rate or failed requests in this step. */
export function saturated(row: StepRow): boolean {
  const failed = Object.values(row.errorsRouter).reduce((a, b) => a + b, 0);
  return (row.offered !== undefined && row.achievedRouter < SATURATED_ACHIEVED * row.offered) || failed > SATURATED_ERRORS * row.sentRouter;
}

const f = (x: number | undefined, digits = 2): string => (x === undefined || !Number.isFinite(x) ? "–" : x.toFixed(digits));
const signed = (x: number, digits = 2): string => (!Number.isFinite(x) ? "–" : (x >= 0 ? "+" : "") + x.toFixed(digits));
const errorsText = (e: Record<string, number>): string =>
  Object.keys(e).length === 0
    ? "0"
    : Object.entries(e)
        .map(([k, n]) => `${n} ${k}`)
        .join(", ");
const table = (header: string[], rows: string[][]): string =>
  [`| ${header.join(" | ")} |`, `| ${header.map(() => "---").join(" | ")} |`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");

function latencyTable(rows: StepRow[], kind: "json" | "stream", what: "ttfb" | "end"): string {
  const p50 = what === "ttfb" ? "ttfb50" : "end50";
  const p99 = what === "ttfb" ? "ttfb99" : "end99";
  return table(
    ["offered (router req/s)", "router p50", "direct p50", "**added p50**", "router p99", "direct p99", "**added p99**"],
    rows.map((row) => {
      const l = row.latency.find((x) => x.kind === kind)!;
      return [
        row.offered === undefined ? "one at a time" : String(row.offered),
        f(l.router[p50]),
        f(l.direct[p50]),
        `**${signed(l.router[p50] - l.direct[p50])}**`,
        f(l.router[p99]),
        f(l.direct[p99]),
        `**${signed(l.router[p99] - l.direct[p99])}**`,
      ];
    }),
  );
}

/** What the router adds over the direct path in a step, by kind and percentile (ms). */
export const added = (row: StepRow, kind: "json" | "stream", p: "end50" | "end99" | "ttfb50" | "ttfb99"): number => {
  const l = row.latency.find((x) => x.kind === kind)!;
  return l.router[p] - l.direct[p];
};

export function renderReport(r: Report): string {
  const m = r.machine;
  const all = [r.sequential, ...r.steps];
  const out: string[] = [];
  const block = (label: string) => r.blocks.find((b) => b.label === label);

  out.push(`# End to end: what the router adds over calling a node directly${r.quick ? " (quick run)" : ""}`);
  out.push(
    `Generated by \`${r.command}\` (bench/e2e/run.ts) on ${r.started.slice(0, 16).replace("T", " ")} UTC, commit \`${m.commit}\`${m.dirty ? " (with local changes)" : ""}, in ${f(r.durationS, 0)} s. ` +
      `All times in milliseconds, as the client sees them over loopback.`,
  );

  // The headline, computed.
  const seqJson = added(r.sequential, "json", "end50");
  const seqJson99 = added(r.sequential, "json", "end99");
  const unsaturated = r.steps.filter((s) => !saturated(s));
  const top = unsaturated[unsaturated.length - 1];
  const summary = [
    `One request at a time, the router adds **${f(seqJson)} ms p50 / ${f(seqJson99)} ms p99** to a tiny non-streaming request ` +
      `(${f(added(r.sequential, "stream", "ttfb50"))} ms p50 to a stream's first byte) over calling the node directly: ` +
      `${seqJson < TARGET_ADDED_P50_MS ? "within" : `**${f(seqJson / TARGET_ADDED_P50_MS, 1)}x** over`} the ${TARGET_ADDED_P50_MS} ms p50 target.`,
  ];
  if (top) {
    summary.push(
      `At ${top.offered} router requests/s (the highest rate it served without falling behind or failing), ${f(added(top, "json", "end50"))} ms p50 / ` +
        `${f(added(top, "json", "end99"))} ms p99.`,
    );
  }
  const sat = r.steps.find((s) => !unsaturated.includes(s));
  if (sat)
    summary.push(
      `At ${sat.offered} requests/s offered it served ${f(sat.achievedRouter, 0)}/s (errors: ${errorsText(sat.errorsRouter)}): saturated.`,
    );
  summary.push(
    `CPU per router request one at a time: ${f(r.sequential.cpuPerRouterRequest.user)} ms in the workerd running the worker and its object, ` +
      `${f(r.sequential.cpuPerRouterRequest.proxy)} ms in wrangler dev's ProxyWorker, ${f(r.sequential.cpuPerRouterRequest.wrangler)} ms in the wrangler CLI.`,
  );
  if (r.workerd) {
    const bare = added(r.workerd.sequential, "json", "end50");
    summary.push(
      `The same router in workerd without wrangler dev's development machinery (no ProxyWorker, no entry worker, no log relay: scripts/workerd-host.ts) adds ` +
        `**${f(bare)} ms p50 / ${f(added(r.workerd.sequential, "json", "end99"))} ms p99** one at a time ` +
        `(${bare < TARGET_ADDED_P50_MS ? "within" : "over"} the ${TARGET_ADDED_P50_MS} ms target; the median of ${r.workerd.rounds.length} rounds, whose p50s ranged ${f(Math.min(...r.workerd.rounds.map((x) => added(x, "json", "end50"))))}-${f(Math.max(...r.workerd.rounds.map((x) => added(x, "json", "end50"))))} ms), ` +
        `${f(added(r.workerd.step, "json", "end50"))} ms p50 at ${r.workerd.compareLabel}, ` +
        `with ${f(r.workerd.sequential.cpuPerRouterRequest.user)} ms of workerd CPU per request.`,
    );
  }
  out.push(summary.join(" "));

  out.push("## Machine");
  out.push(
    table(
      ["", ""],
      [
        ["CPU", `${m.cpu}, ${m.cores} cores, ${f(m.memoryGiB, 1)} GiB`],
        ["Kernel / Node.js", `${m.kernel} / ${m.node}`],
        ["wrangler / workerd", `${m.wrangler} / ${m.workerd}`],
        ["Other work's CPU just before the run", `${f(r.otherCoresAtStart)} cores`],
        [
          "Load average (1, 5, 15 min) at start / end",
          `${r.loadAverageStart.map((x) => f(x)).join(", ")} / ${r.loadAverageEnd.map((x) => f(x)).join(", ")}`,
        ],
      ],
    ),
  );
  out.push(
    "The machine is shared with other work (other benchmarks and test suites may run beside this one). Both paths are measured " +
      "interleaved, so they share whatever else runs; the column _other load_ below is the CPU (in cores) that processes outside " +
      "this benchmark used during each step.",
  );

  out.push("## Method");
  const p = r.plan;
  out.push(
    [
      `- **System**: scripts/system.ts \`startSystem\` (the router under \`wrangler dev\` with local workerd and Durable Objects, one region, ${p.nodes} simulated nodes in this process) with prefill and decode at 10^9 tokens/s and one-token answers: a node answers in about a timer tick, so what is measured is the HTTP path.`,
      `- **Requests**: a chat request of ~330 characters (system + user turn, each request's user turn numbered, so the router indexes a new prefix each time), \`max_tokens: 1\`, non-streaming (\`json\`) and \`stream: true\` (\`stream\`). The direct path sends the byte-identical body to the nodes in turn. Router requests rotate over ${p.tenants} tenants' API keys (wrangler simulates the edge rate limiter binding locally, 1,200 requests a minute per tenant; every request still makes the limiter call).`,
      `- **Client**: a separate Node.js process (bench/e2e/load.ts) with one keep-alive \`http.Agent\` per target (same settings for every path); a request is timed from its write to the first body byte (_TTFB_) and to the body's end (_end_). A streamed answer's first body byte is its first SSE event (the node sends its headers at once; the router sends its headers with the first byte).`,
      `- **One at a time**: ${p.sequential} requests per path and kind, the four interleaved in shuffled cycles, after ${p.warmup} of each to warm up.`,
      `- **Open loop**: Poisson arrivals for ${p.stepMs / 1000} s per step, the router and the direct path each at the offered rate (half of each streamed), interleaved; offered rates ${p.rates.join(", ")} requests/s, stopping after the first step where the router answered under 90% of the offered rate or failed over 1% of requests. Over ${p.maxInflight} requests in flight per path, arrivals are shed and counted as errors.`,
      `- **CPU**: utime + stime from /proc of each process around each step, less its idle rate (measured for 3 s before the steps), divided by the requests the router answered. _user workerd_ runs miniflare's entry worker, the router worker, its region Durable Object and wrangler's local rate limiter object, all on one V8 thread (so the process total cannot be split between worker and object: see the profile below). _proxy workerd_ runs wrangler dev's ProxyWorker, which takes every request on the public port and forwards it over loopback HTTP to the user workerd: it exists only in local development. _wrangler_ is the CLI's Node.js process, which receives the runtime's log lines. All three are included in the measured latency; none exists in production except the worker and the object.`,
      `- **Percentiles** are nearest-rank over each path's own requests; _added_ = router percentile minus direct percentile.`,
    ].join("\n"),
  );

  out.push("## Added latency by offered rate");
  out.push("### Non-streaming, request to end of body");
  out.push(latencyTable(all, "json", "end"));
  out.push("### Streaming, request to first body byte (first SSE event)");
  out.push(latencyTable(all, "stream", "ttfb"));
  out.push("### Streaming, request to end of stream");
  out.push(latencyTable(all, "stream", "end"));
  out.push("### Rates, errors and CPU per router request");
  out.push(
    table(
      [
        "offered (router req/s)",
        "achieved router / direct (req/s)",
        "router errors",
        "direct errors",
        "CPU ms/req: user workerd",
        "proxy workerd",
        "wrangler CLI",
        "dev stack total",
        "worker's own duration p50 / p99",
        "other load (cores)",
        "client lag p99",
      ],
      all.map((s) => [
        s.offered === undefined ? "one at a time" : String(s.offered),
        `${f(s.achievedRouter, 0)} / ${f(s.achievedDirect, 0)}`,
        errorsText(s.errorsRouter),
        errorsText(s.errorsDirect),
        f(s.cpuPerRouterRequest.user),
        f(s.cpuPerRouterRequest.proxy),
        f(s.cpuPerRouterRequest.wrangler),
        f((s.cpuPerRouterRequest.user ?? 0) + (s.cpuPerRouterRequest.proxy ?? 0) + (s.cpuPerRouterRequest.wrangler ?? 0)),
        s.worker ? `${f(s.worker.duration50, 0)} / ${f(s.worker.duration99, 0)}` : "–",
        f(s.otherCores),
        s.offered === undefined ? "–" : f(s.lagP99Ms),
      ]),
    ),
  );
  out.push(
    `_worker's own duration_ is the decision line's \`duration_ms\` (from the handler's start, after authentication, to the end of the relay), on the worker's clock, which advances in whole milliseconds. ` +
      `Idle CPU subtracted (ms per second): ${Object.entries(r.idle)
        .map(([k, v]) => `${k} ${f(v)}`)
        .join(", ")}. _client lag_ is how late the generator wrote requests against their schedule.`,
  );

  // Where the time goes.
  out.push("## Where the added latency goes");
  const rj = block("router json");
  const ij = block("router json, user worker's port (no ProxyWorker)");
  const dj = block("direct json");
  const hz = block("router GET /healthz");
  const ihz = block("router GET /healthz, user worker's port");
  const nh = block("node GET /health (direct)");
  out.push(
    `Each request kind below ran one at a time in blocks of ${p.blockSize}, ${p.blockRounds} rounds in rotated order, with the CPU of each process sampled around every block. ` +
      "The _user worker's port_ is the address the ProxyWorker forwards to: requests there skip wrangler dev's proxy and reach miniflare's entry worker and the router directly.",
  );
  out.push(
    table(
      [
        "request",
        "n",
        "end p50",
        "end p99",
        "CPU ms/req: user workerd",
        "proxy workerd",
        "wrangler CLI",
        "worker's first_byte_ms / duration_ms p50",
        "other load (cores)",
      ],
      r.blocks.map((b) => [
        b.label,
        `${b.requests}${b.errors ? ` (${b.errors} failed)` : ""}`,
        f(b.end50),
        f(b.end99),
        f(b.cpuPerRequest.user),
        f(b.cpuPerRequest.proxy),
        f(b.cpuPerRequest.wrangler),
        b.workerDuration50 === undefined ? "–" : `${f(b.workerFirstByte50, 0)} / ${f(b.workerDuration50, 0)}`,
        f(b.otherCores),
      ]),
    ),
  );
  if (rj && ij && dj && hz && ihz && nh) {
    const proxyHop = rj.end50 - ij.end50;
    const floor = ihz.end50 - nh.end50;
    const inner = ij.end50 - dj.end50;
    const handler = inner - floor;
    const userCpu = (b: BlockRow) => b.cpuPerRequest.user ?? NaN;
    out.push(
      [
        "Differences of the p50s above:",
        "",
        `- **wrangler dev's ProxyWorker** (local development only): ${f(proxyHop)} ms on a chat request (router json minus the same on the user worker's port), ${f(hz.end50 - ihz.end50)} ms on /healthz; ${f(rj.cpuPerRequest.proxy)} ms of CPU per request in its workerd.`,
        `- **The worker's floor** (a second loopback HTTP hop into workerd, miniflare's entry worker, Hono, the request-id and bounds middleware, a JSON answer): ${f(floor)} ms (/healthz on the user worker's port minus a node's /health), ${f(userCpu(ihz))} ms of CPU per request in the user workerd.`,
        `- **The inference path above that floor** (authentication, the local rate limiter call, body parsing and validation, hashing, the route RPC to the region object, the call to the node through workerd's fetch, the relay, the decision line, the firstByte and complete RPCs): ${f(handler)} ms (router json on the user worker's port minus direct json, minus the floor), ${f(userCpu(ij) - userCpu(ihz))} ms of CPU per request more than /healthz.`,
        `- In total, without the ProxyWorker, the router adds ${f(inner)} ms p50 on this machine; with it, ${f(rj.end50 - dj.end50)} ms.`,
      ].join("\n"),
    );
    if (ij.workerDuration50 !== undefined) {
      out.push(
        `On the worker's own clock (whole milliseconds), its decision lines give the node call (\`first_byte_ms\`) ${f(ij.workerFirstByte50, 0)} ms p50 and the whole handler (\`duration_ms\`) ${f(ij.workerDuration50, 0)} ms p50, ` +
          `against ${f(ij.end50)} ms the client measured on the user worker's port and ${f(dj.end50)} ms for the direct call: the client's remaining ~${f(ij.end50 - (ij.workerDuration50 ?? 0), 0)} ms are spent before the handler starts (entry worker, routing, authentication) and after it ends: the relay's end handler (src/proxy/relay.ts, dispatch.ts \`finish\`) takes \`duration_ms\`, then writes the decision line (\`console.log\`) and starts the complete RPC in the same task that closed the stream, so workerd sends the end of the body only after both; then the answer leaving workerd, and whole-millisecond rounding.`,
      );
    }
  }

  if (r.profile) {
    const prof = r.profile;
    out.push("### CPU profile of the worker's isolate");
    out.push(
      `V8's sampling profiler (${prof.intervalUs} µs asked, median gap between samples ${f(prof.medianIntervalUs, 0)} µs; ${prof.samples} samples not idle, ${f(prof.samplesPerRequest, 1)} per request) on the user worker's isolate, through wrangler dev's inspector proxy, over ${prof.requests} router requests one at a time (half streamed). ` +
        `Each sample goes to the object if its stack passes through the region object's class (durable-objects/region.ts: its zod parsing and RegionRouter included), else to the innermost frame's source module (bench/e2e/profile.ts). ` +
        `Every sample counts as one (the gaps between samples are irregular: the thread also runs other isolates). The profiler slows the isolate: ${f(prof.userCpuPerRequest)} ms of user-workerd CPU per request while profiling, against ${f(r.sequential.cpuPerRouterRequest.user)} ms without. ` +
        `Not in this isolate: miniflare's entry worker and wrangler's rate limiter object (separate isolates in the same process) and the ProxyWorker.`,
    );
    const stages = STAGES.filter((s) => prof.share[s] > 0).sort((a, b) => prof.share[b] - prof.share[a]);
    out.push(
      table(
        ["stage", "share of samples"],
        stages.map((s) => [s, `${f(100 * prof.share[s], 1)}%`]),
      ),
    );
    const others = Object.entries(prof.otherModules)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 6)
      .map(([where, x]) => `\`${where}\` ${f(100 * x, 1)}%`)
      .join(", ");
    if (others) out.push(`_other worker code_, by innermost bundle module and top-level function: ${others}.`);
    const unprofiled = r.sequential.cpuPerRouterRequest.user ?? NaN;
    // The worker's floor (entry worker, Hono, the HTTP hop), mostly outside this isolate's profile.
    const floorCpu = block("router GET /healthz, user worker's port")?.cpuPerRequest.user ?? NaN;
    const above = unprofiled - floorCpu;
    out.push(
      `**Worker against object**: of the samples in JavaScript (all but garbage collection and "(program)", ${f(100 * prof.jsShare, 0)}% of the samples), the region object's methods took **${f(100 * prof.objectShare, 1)}%** and the worker the rest. ` +
        `The user workerd's unprofiled CPU one at a time, ${f(unprofiled)} ms per request, also pays for miniflare's entry worker and the local rate limiter object (other isolates on the same thread); /healthz on the user worker's port costs ${f(floorCpu)} ms (entry worker, Hono, the HTTP hop). ` +
        `Split in the profile's proportions, the ${f(above)} ms above that would be about **${f(above * prof.jsShare * prof.objectShare)} ms in the object's JavaScript** and **${f(above * prof.jsShare * (1 - prof.objectShare))} ms in the worker's**, the rest native work and GC that cannot be split (the RPC plumbing between the two is there). An estimate, not a measurement: the profiler's overhead need not fall evenly.`,
    );
  }

  if (r.logOff) {
    const on = r.steps.find((s) => s.label === r.logOff!.compareLabel)!;
    const off = r.logOff;
    out.push("### The decision log");
    out.push(
      "The same system booted again with `decision_log_sample_rate = 0` (no `console.log` per request; the default is 1, one JSON line per request), measured the same way. " +
        "In wrangler dev each line is also relayed through the inspector protocol to the wrangler CLI.",
    );
    const row = (name: string, seq: StepRow, step: StepRow) => [
      name,
      f(added(seq, "json", "end50")),
      f(added(seq, "stream", "ttfb50")),
      f(added(seq, "stream", "end50")),
      f(added(step, "json", "end50")),
      f(added(step, "json", "end99")),
      f(step.cpuPerRouterRequest.user),
      f(step.cpuPerRouterRequest.proxy),
      f(step.cpuPerRouterRequest.wrangler),
      `${f(seq.otherCores)} / ${f(step.otherCores)}`,
    ];
    out.push(
      table(
        [
          "decision log",
          "added p50 json, one at a time",
          "added TTFB p50 stream, one at a time",
          "added end p50 stream, one at a time",
          `added p50 json at ${off.compareLabel}`,
          `added p99 json at ${off.compareLabel}`,
          `CPU ms/req at ${off.compareLabel}: user workerd`,
          "proxy workerd",
          "wrangler CLI",
          "other load (cores), one at a time / at the rate",
        ],
        [row("on (sample rate 1)", r.sequential, on), row("off (sample rate 0)", off.sequential, off.step)],
      ),
    );
  }

  if (r.workerd) {
    const w = r.workerd;
    const dev = r.steps.find((s) => s.label === w.compareLabel)!;
    out.push("## The router in workerd alone");
    out.push(
      "The same bundle (`wrangler deploy --dry-run`), configuration and fleet, booted by scripts/workerd-host.ts: wrangler's own Miniflare and workerd, " +
        "the bindings of wrangler.toml, and a socket straight to the router worker, as on Cloudflare, where the runtime hands a request to the worker. " +
        "Left out, because production has none of them: the ProxyWorker process, miniflare's entry worker (a worker hop that also reports every request to the CLI over loopback HTTP) " +
        "and the inspector session that relays every `console.log` to the CLI (the decision lines go to workerd's stdout instead). " +
        "Still in: one loopback HTTP hop into workerd, the rate limiter and Analytics Engine bindings' local simulations, and the node call from workerd. " +
        "Measured the same way, with the direct path interleaved.",
    );
    const row = (name: string, seq: StepRow, step: StepRow) => [
      name,
      f(added(seq, "json", "end50")),
      f(added(seq, "json", "end99")),
      f(added(seq, "stream", "ttfb50")),
      f(added(seq, "stream", "end50")),
      f(added(step, "json", "end50")),
      f(added(step, "json", "end99")),
      f(seq.cpuPerRouterRequest.user),
      f(seq.cpuPerRouterRequest.proxy),
      f(seq.cpuPerRouterRequest.wrangler),
      seq.worker ? `${f(seq.worker.firstByte50, 0)} / ${f(seq.worker.duration50, 0)}` : "–",
      `${f(seq.otherCores)} / ${f(step.otherCores)}`,
    ];
    out.push(
      table(
        [
          "router runs in",
          "added p50 json, one at a time",
          "added p99 json, one at a time",
          "added TTFB p50 stream, one at a time",
          "added end p50 stream, one at a time",
          `added p50 json at ${w.compareLabel}`,
          `added p99 json at ${w.compareLabel}`,
          "CPU ms/req one at a time: workerd with the worker",
          "proxy workerd",
          "wrangler CLI / host",
          "worker's first_byte_ms / duration_ms p50",
          "other load (cores), one at a time / at the rate",
        ],
        [row("wrangler dev (`npm start`)", r.sequential, dev), row("workerd alone (median round)", w.sequential, w.step)],
      ),
    );
    out.push(
      `Workerd alone, one at a time, by round (${w.rounds.length} rounds of the same length as the wrangler dev measurement, in one boot): ` +
        w.rounds
          .map(
            (x, k) =>
              `round ${k + 1} ${f(added(x, "json", "end50"))} ms p50 / ${f(added(x, "json", "end99"))} ms p99 added, ${f(x.cpuPerRouterRequest.user)} ms CPU per request`,
          )
          .join("; ") +
        ".",
    );
  }

  const events = Object.entries(r.routerEvents).filter(([k]) => !["node_registered", "node_deregistered"].includes(k));
  if (events.length > 0)
    out.push(`Router log events other than request lines during the run: ${events.map(([k, n]) => `${k} ${n}`).join(", ")}.`);
  if (r.restarts.length > 0)
    out.push(`Processes replaced by wrangler during a step (that step's CPU figure for them is omitted): ${r.restarts.join("; ")}.`);
  return out.join("\n\n") + "\n";
}
