/**
 * Renders the end-to-end benchmark's figures as bench/e2e/RESULTS.md. Every number in the file
 * comes from the run it reports; the prose around them only says how they were taken and what
 * each column means, and the summary sentences and verdicts are computed from the tables.
 */

/**
 * What `npm start`'s topology may add, p50 on loopback one request at a time (issue 32 item 6:
 * "adds <= 5 ms p50 one request at a time").
 */
export const TARGET_START_ADDED_P50_MS = 5;
/**
 * How many times a plain proxy's added time the router's own time may be under load (issue 32
 * item 6: "within a few times a plain proxy's"; "a few" read as at most 3).
 */
export const TARGET_PLAIN_PROXY_RATIO = 3;
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

/** The three paths of every measurement, interleaved: through the router, through the plain proxy, straight to a node. */
export type Path = "router" | "plain" | "direct";
export type Percentile = "end50" | "end99" | "ttfb50" | "ttfb99";

export interface StepRow {
  label: string;
  /** Router requests/s offered (the plain proxy and the direct path are offered as many each); undefined: one at a time. */
  offered: number | undefined;
  achieved: Record<Path, number>;
  sent: Record<Path, number>;
  errors: Record<Path, Record<string, number>>;
  latency: Array<{ kind: "json" | "stream" } & Record<Path, PathLatency>>;
  /**
   * CPU ms per request the router answered, by process role: `workerd` (the workers and their
   * objects), `host` (workerd-host or the wrangler CLI), `proxy` (wrangler dev's ProxyWorker),
   * `fleet`, `client`.
   */
  cpuPerRouterRequest: Record<string, number>;
  /** The plain proxy process's CPU ms per request it answered. */
  cpuPerPlainRequest: number;
  answered: Record<"router" | "plain", number>;
  otherCores: number;
  lagP99Ms: number;
  /** The worker's own timings from its decision lines (whole milliseconds). */
  worker: { lines: number; firstByte50: number; duration50: number; duration99: number } | undefined;
}

/** One system booted and measured: `npm start`'s (workerd-single) or the same workers under wrangler dev (`runtime: "wrangler-dev"`). */
export interface SystemRun {
  runtime: "workerd-single" | "wrangler-dev";
  /** Background CPU per process role with no requests (ms per second), subtracted from every step. */
  idle: Record<string, number>;
  /** One-at-a-time rounds in one boot, each as long as the plan's `sequential`. */
  rounds: StepRow[];
  /** The open-loop steps, in the order run (the sweep stops at the first saturated one). */
  steps: StepRow[];
  /** Router log events other than request lines, by event name. */
  events: Record<string, number>;
  /** Steps during which a measured process was replaced (their CPU figure for it is omitted). */
  restarts: string[];
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
    rounds: number;
    rates: number[];
    stepMs: number;
    devRate: number;
    tenants: number;
    nodes: number;
    maxInflight: number;
  };
  /** `npm start`'s topology: the primary system. */
  start: SystemRun;
  /** The same workers under wrangler dev: the secondary system (undefined if it was not measured). */
  dev: SystemRun | undefined;
}

/** Whether the router fell behind the offered rate or failed requests in this step. */
export function saturated(row: StepRow): boolean {
  const failed = Object.values(row.errors.router).reduce((a, b) => a + b, 0);
  return (
    (row.offered !== undefined && row.achieved.router < SATURATED_ACHIEVED * row.offered) || failed > SATURATED_ERRORS * row.sent.router
  );
}

/** What a path (the router by default) adds over the direct path in a step, by kind and percentile (ms). */
export const added = (row: StepRow, kind: "json" | "stream", p: Percentile, path: "router" | "plain" = "router"): number => {
  const l = row.latency.find((x) => x.kind === kind)!;
  return l[path][p] - l.direct[p];
};

/**
 * The router's own time as a multiple of the plain proxy's (both added over the direct path);
 * NaN when the plain proxy added nothing measurable (zero or less), where no multiple means anything.
 */
export function plainProxyRatio(routerAdded: number, plainAdded: number): number {
  if (!Number.isFinite(routerAdded) || !Number.isFinite(plainAdded) || plainAdded <= 0) return NaN;
  return Math.max(0, routerAdded) / plainAdded;
}

/** The median of one-at-a-time rounds by the router's added p50 on a non-streamed request (the lower middle of an even count). */
export function medianRound(rounds: StepRow[]): StepRow {
  if (rounds.length === 0) throw new Error("no one-at-a-time rounds to take the median of");
  const sorted = [...rounds].sort((a, b) => added(a, "json", "end50") - added(b, "json", "end50"));
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

export interface LoadVerdictRow {
  offered: number;
  routerAdded50: number;
  plainAdded50: number;
  ratio50: number;
  routerAdded99: number;
  plainAdded99: number;
  ratio99: number;
  saturated: boolean;
  /** Within TARGET_PLAIN_PROXY_RATIO at p50 (false when the ratio is undefined). */
  pass: boolean;
}

/**
 * The under-load target, step by step: the router's added p50 (non-streamed, to the end of the
 * body) against the plain proxy's, and their ratio. The verdict holds over the steps the router
 * served (not saturated): at a saturated step every figure is queueing, which the sweep reports
 * separately as the router's capacity. No unsaturated step: no verdict (false).
 */
export function loadVerdict(steps: StepRow[]): { rows: LoadVerdictRow[]; pass: boolean } {
  const rows = steps
    .filter((s) => s.offered !== undefined)
    .map((s) => {
      const routerAdded50 = added(s, "json", "end50");
      const plainAdded50 = added(s, "json", "end50", "plain");
      const routerAdded99 = added(s, "json", "end99");
      const plainAdded99 = added(s, "json", "end99", "plain");
      const ratio50 = plainProxyRatio(routerAdded50, plainAdded50);
      return {
        offered: s.offered!,
        routerAdded50,
        plainAdded50,
        ratio50,
        routerAdded99,
        plainAdded99,
        ratio99: plainProxyRatio(routerAdded99, plainAdded99),
        saturated: saturated(s),
        pass: ratio50 <= TARGET_PLAIN_PROXY_RATIO,
      };
    });
  const served = rows.filter((r) => !r.saturated);
  return { rows, pass: served.length > 0 && served.every((r) => r.pass) };
}

const f = (x: number | undefined, digits = 2): string => (x === undefined || !Number.isFinite(x) ? "–" : x.toFixed(digits));
const signed = (x: number, digits = 2): string => (!Number.isFinite(x) ? "–" : (x >= 0 ? "+" : "") + x.toFixed(digits));
const ratioText = (x: number): string => (Number.isFinite(x) ? `${x.toFixed(1)}x` : "–");
const verdict = (pass: boolean): string => (pass ? "**PASS**" : "**FAIL**");
const errorsText = (e: Record<string, number>): string =>
  Object.keys(e).length === 0
    ? "0"
    : Object.entries(e)
        .map(([k, n]) => `${n} ${k}`)
        .join(", ");
const table = (header: string[], rows: string[][]): string =>
  [`| ${header.join(" | ")} |`, `| ${header.map(() => "---").join(" | ")} |`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
const rateLabel = (row: StepRow): string => (row.offered === undefined ? "one at a time" : String(row.offered));

function latencyTable(rows: StepRow[], kind: "json" | "stream", what: "ttfb" | "end"): string {
  const p50: Percentile = what === "ttfb" ? "ttfb50" : "end50";
  const p99: Percentile = what === "ttfb" ? "ttfb99" : "end99";
  return table(
    [
      "offered (req/s a path)",
      "direct p50",
      "router p50",
      "**router added p50**",
      "plain proxy added p50",
      "direct p99",
      "router p99",
      "**router added p99**",
      "plain proxy added p99",
    ],
    rows.map((row) => {
      const l = row.latency.find((x) => x.kind === kind)!;
      return [
        rateLabel(row),
        f(l.direct[p50]),
        f(l.router[p50]),
        `**${signed(l.router[p50] - l.direct[p50])}**`,
        signed(l.plain[p50] - l.direct[p50]),
        f(l.direct[p99]),
        f(l.router[p99]),
        `**${signed(l.router[p99] - l.direct[p99])}**`,
        signed(l.plain[p99] - l.direct[p99]),
      ];
    }),
  );
}

/** The router's CPU per request over all its processes (workerd, the host or CLI, wrangler's ProxyWorker). */
const routerCpu = (row: StepRow): number =>
  (row.cpuPerRouterRequest.workerd ?? 0) + (row.cpuPerRouterRequest.host ?? 0) + (row.cpuPerRouterRequest.proxy ?? 0);

function ratesTable(run: SystemRun): string {
  const dev = run.runtime === "wrangler-dev";
  const all = [medianRound(run.rounds), ...run.steps];
  return table(
    [
      "offered (req/s a path)",
      "achieved router / plain / direct (req/s)",
      "router errors",
      "plain / direct errors",
      "CPU ms/router req: workerd",
      dev ? "ProxyWorker workerd" : "",
      dev ? "wrangler CLI" : "workerd-host",
      "router total",
      "CPU ms/plain req: plain proxy",
      "worker's own duration p50 / p99",
      "other load (cores)",
      "client lag p99",
    ].filter(Boolean),
    all.map((s) =>
      [
        rateLabel(s),
        `${f(s.achieved.router, 0)} / ${f(s.achieved.plain, 0)} / ${f(s.achieved.direct, 0)}`,
        errorsText(s.errors.router),
        `${errorsText(s.errors.plain)} / ${errorsText(s.errors.direct)}`,
        f(s.cpuPerRouterRequest.workerd),
        dev ? f(s.cpuPerRouterRequest.proxy) : undefined,
        f(s.cpuPerRouterRequest.host),
        f(routerCpu(s)),
        f(s.cpuPerPlainRequest),
        s.worker ? `${f(s.worker.duration50, 0)} / ${f(s.worker.duration99, 0)}` : "–",
        f(s.otherCores),
        s.offered === undefined ? "–" : f(s.lagP99Ms),
      ].filter((x): x is string => x !== undefined),
    ),
  );
}

function roundsText(run: SystemRun): string {
  return run.rounds
    .map(
      (x, k) =>
        `round ${k + 1} ${signed(added(x, "json", "end50"))} ms p50 / ${signed(added(x, "json", "end99"))} ms p99 added (plain proxy ${signed(added(x, "json", "end50", "plain"))} ms p50), ${f(x.cpuPerRouterRequest.workerd)} ms workerd CPU per request, other load ${f(x.otherCores)} cores`,
    )
    .join("; ");
}

function idleText(run: SystemRun): string {
  return Object.entries(run.idle)
    .map(([k, v]) => `${k} ${f(v)}`)
    .join(", ");
}

export function renderReport(r: Report): string {
  const m = r.machine;
  const p = r.plan;
  const start = r.start;
  const seq = medianRound(start.rounds);
  const out: string[] = [];

  out.push(`# End to end: what \`npm start\`'s router adds over calling a node directly${r.quick ? " (quick run)" : ""}`);
  out.push(
    `Generated by \`${r.command}\` (bench/e2e/run.ts) on ${r.started.slice(0, 16).replace("T", " ")} UTC, commit \`${m.commit}\`${m.dirty ? " (with local changes)" : ""}, in ${f(r.durationS, 0)} s. ` +
      `All times in milliseconds, as the client sees them over loopback.`,
  );

  // The headline and the targets, computed.
  const seqAdded = added(seq, "json", "end50");
  const seqPass = seqAdded <= TARGET_START_ADDED_P50_MS;
  const roundAdded = start.rounds.map((x) => added(x, "json", "end50"));
  const load = loadVerdict(start.steps);
  const served = load.rows.filter((x) => !x.saturated);
  const sat = start.steps.find(saturated);
  const top = [...start.steps].reverse().find((s) => !saturated(s));
  const summary = [
    `\`npm start\` runs the edge and region workers in one workerd process (scripts/system.ts, runtime \`workerd-single\`). ` +
      `One request at a time, that topology adds **${f(seqAdded)} ms p50 / ${f(added(seq, "json", "end99"))} ms p99** to a tiny non-streaming request over calling the node directly ` +
      `(${f(added(seq, "stream", "ttfb50"))} ms p50 to a stream's first byte; the median of ${start.rounds.length} rounds, whose p50s ranged ${f(Math.min(...roundAdded))}-${f(Math.max(...roundAdded))} ms): ` +
      `${seqPass ? "within" : "over"} the ${TARGET_START_ADDED_P50_MS} ms target. A plain Node.js reverse proxy in the same place adds ${f(added(seq, "json", "end50", "plain"))} ms p50.`,
  ];
  if (served.length > 0)
    summary.push(
      `Under open-loop load its own time (added p50) is ${served.map((x, i) => `${ratioText(x.ratio50)}${i === 0 ? " the plain proxy's" : ""} at ${x.offered} req/s`).join(", ")}: ` +
        `${load.pass ? "within" : "not within"} ${TARGET_PLAIN_PROXY_RATIO}x at every rate it served.`,
    );
  if (sat)
    summary.push(
      `At ${sat.offered} requests/s offered it served ${f(sat.achieved.router, 0)}/s (errors: ${errorsText(sat.errors.router)}): saturated${top ? `; ${top.offered} req/s was the highest rate it served` : ""}.`,
    );
  summary.push(
    `CPU per request one at a time: ${f(seq.cpuPerRouterRequest.workerd)} ms in the workerd process (edge, region worker, region object and the local stand-ins), ${f(seq.cpuPerRouterRequest.host)} ms in its Node.js host; the plain proxy ${f(seq.cpuPerPlainRequest)} ms per request.`,
  );
  if (r.dev) {
    const dseq = medianRound(r.dev.rounds);
    const dstep = r.dev.steps[0];
    summary.push(
      `For comparison, the same workers under \`wrangler dev\` (what \`npm start\` and scripts/system.ts's default ran before) add ${f(added(dseq, "json", "end50"))} ms p50 one at a time` +
        (dstep
          ? ` and ${f(added(dstep, "json", "end50"))} ms p50 at ${dstep.offered} req/s (${ratioText(plainProxyRatio(added(dstep, "json", "end50"), added(dstep, "json", "end50", "plain")))} the plain proxy's)`
          : "") +
        `, with ${f(routerCpu(dseq))} ms of CPU per request over its three processes.`,
    );
  }
  out.push(summary.join(" "));

  out.push("## Targets (issue 32, item 6)");
  out.push(
    table(
      ["target", "measured", "verdict"],
      [
        [
          `\`npm start\`'s topology adds <= ${TARGET_START_ADDED_P50_MS} ms p50, one request at a time`,
          `${signed(seqAdded)} ms p50 (median of ${start.rounds.length} rounds, ${f(Math.min(...roundAdded))}-${f(Math.max(...roundAdded))}), ${signed(added(seq, "json", "end99"))} ms p99`,
          verdict(seqPass),
        ],
        [
          `Under load, its own time stays within a few times a plain proxy's ("a few": <= ${TARGET_PLAIN_PROXY_RATIO}x, added p50, at every rate it served)`,
          load.rows.length === 0
            ? "no open-loop step"
            : load.rows
                .map(
                  (x) =>
                    `${x.offered} req/s: ${ratioText(x.ratio50)} (${signed(x.routerAdded50)} / ${signed(x.plainAdded50)})${x.saturated ? ", saturated" : ""}`,
                )
                .join("; "),
          verdict(load.pass),
        ],
      ],
    ),
  );

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
    "The machine is shared with other work (other benchmarks and test suites may run beside this one). The three paths are measured " +
      "interleaved, so they share whatever else runs; the column _other load_ below is the CPU (in cores) that processes outside " +
      "this benchmark used during each step.",
  );

  out.push("## Method");
  out.push(
    [
      `- **System** (primary): what \`npm start\` runs. scripts/system.ts \`startSystem\` with \`runtime: "workerd-single"\`, as scripts/start.ts calls it: the edge and the region's worker generated from wrangler.toml as a deploy generates them, bundled as \`wrangler deploy\` bundles them, in one workerd process (scripts/workerd-host.ts) with the service binding between them in-process, the dashboard's static assets included (served, as under \`npm start\`, by an asset worker of the host's own that the edge passes the dashboard's paths to; the API's requests go straight to the edge, as on Cloudflare). Different from \`npm start\` only where a benchmark needs it: one region (wrangler.toml's first; \`npm start\` has a second region worker, idle here), ${p.tenants} tenants (below), a fresh Durable Object store instead of .warmpath/state, and ${p.nodes} simulated nodes in this process with prefill and decode at 10^9 tokens/s and one-token answers: a node answers in about a timer tick, so what is measured is the HTTP path. The decision log is on (sample rate 1, the default), its lines read from workerd's output as \`npm start -- --verbose\` shows them.`,
      `- **System** (secondary): the same generated workers under \`wrangler dev\` (its ProxyWorker in a second workerd process, miniflare's entry worker, every log line relayed to the CLI): what \`npm start\`, and the tests, benchmarks and demo that take scripts/system.ts's default, ran before; \`npm run dev\`, for a developer editing a worker, runs \`wrangler dev\` too, on wrangler.toml's single-worker composition (not measured here). One at a time and at ${p.devRate} req/s only. The per-stage cost of the request path is bench:wan's (bench/wan/RESULTS.md).`,
      `- **Three paths, interleaved**: every request kind goes through the router, through a plain proxy, and straight to a node, the three in shuffled cycles within the same step, so all three see the same machine load at the same moments and the differences between them are the router's and the proxy's, not the machine's mood (on a shared 2-core machine, separate runs of each path would measure whatever else ran then).`,
      `- **The plain proxy** (bench/e2e/plain-proxy.ts): a minimal Node.js reverse proxy in a process of its own, node:http on both sides with a keep-alive agent to the nodes, request and response bodies streamed through as they arrive, hop-by-hop headers dropped, the nodes taken in turn; no routing, authentication, parsing or logging. It is the yardstick for "a plain proxy's" time under load: a real forwarding hop, whose CPU is read from /proc like the router's.`,
      `- **Requests**: a chat request of ~330 characters (system + user turn, each request's user turn numbered, so the router indexes a new prefix each time), \`max_tokens: 1\`, non-streaming (\`json\`) and \`stream: true\` (\`stream\`). The plain proxy and the direct path get the byte-identical body, the direct path sending to the nodes in turn. Router requests rotate over ${p.tenants} tenants' API keys (the edge rate limiter binding is simulated locally, 1,200 requests a minute per tenant; every request still makes the limiter call).`,
      `- **Client**: a separate Node.js process (bench/e2e/load.ts) with one keep-alive \`http.Agent\` per target (same settings for every path); a request is timed from its write to the first body byte (_TTFB_) and to the body's end (_end_). A streamed answer's first body byte is its first SSE event.`,
      `- **One at a time**: ${p.rounds} rounds of ${p.sequential} requests per path and kind in one boot (the six interleaved in shuffled cycles), after ${p.warmup} of each to warm up; the figure is the median round's (by the router's added p50), and the rounds' spread says how far one round on this machine can be trusted. wrangler dev: one round.`,
      `- **Open loop**: Poisson arrivals for ${p.stepMs / 1000} s per step, the router, the plain proxy and the direct path each at the offered rate (half of each streamed), interleaved; offered rates ${p.rates.join(", ")} requests/s, stopping after the first step where the router answered under 90% of the offered rate or failed over 1% of requests. Open, not closed, loop: a closed loop slows down with the router and hides its queueing. Over ${p.maxInflight} requests in flight per path, arrivals are shed and counted as errors.`,
      `- **Own time**: a path's _added_ time is its percentile minus the direct path's (the paths' requests are not paired, so these are differences of percentiles). The router's own time against the plain proxy's is the ratio of their added p50s (non-streaming, to the end of the body); no ratio where the plain proxy added nothing measurable.`,
      `- **CPU**: utime + stime from /proc of each process around each step, less its idle rate (measured for 3 s before the steps), divided by the requests that path answered. For \`npm start\`: _workerd_ runs the edge, the region worker, its Durable Object and Miniflare's local stand-ins (the rate limiter, Analytics Engine, the dashboard's asset worker), all on one thread; _workerd-host_ is the Node.js process that started it through Miniflare and receives its log lines. Under wrangler dev: the workerd running the workers, the workerd running wrangler's ProxyWorker, and the wrangler CLI. The plain proxy's CPU is per request it answered.`,
      `- **Percentiles** are nearest-rank over each path's own requests.`,
    ].join("\n"),
  );

  out.push("## `npm start`'s topology (workerd-single)");
  out.push("### Own time against a plain proxy's, by offered rate");
  out.push(
    table(
      [
        "offered (req/s a path)",
        "router added p50",
        "plain proxy added p50",
        "**ratio p50**",
        "router added p99",
        "plain proxy added p99",
        "ratio p99",
        `within ${TARGET_PLAIN_PROXY_RATIO}x (p50)`,
      ],
      [
        [
          "one at a time",
          signed(seqAdded),
          signed(added(seq, "json", "end50", "plain")),
          `**${ratioText(plainProxyRatio(seqAdded, added(seq, "json", "end50", "plain")))}**`,
          signed(added(seq, "json", "end99")),
          signed(added(seq, "json", "end99", "plain")),
          ratioText(plainProxyRatio(added(seq, "json", "end99"), added(seq, "json", "end99", "plain"))),
          "(not a target)",
        ],
        ...load.rows.map((x) => [
          String(x.offered),
          signed(x.routerAdded50),
          signed(x.plainAdded50),
          `**${ratioText(x.ratio50)}**`,
          signed(x.routerAdded99),
          signed(x.plainAdded99),
          ratioText(x.ratio99),
          x.saturated ? "saturated (not in the verdict)" : x.pass ? "yes" : "no",
        ]),
      ],
    ),
  );
  out.push("Non-streaming requests, to the end of the body; the tables below have every path's figures.");
  const all = [seq, ...start.steps];
  out.push("### Non-streaming, request to end of body");
  out.push(latencyTable(all, "json", "end"));
  out.push("### Streaming, request to first body byte (first SSE event)");
  out.push(latencyTable(all, "stream", "ttfb"));
  out.push("### Streaming, request to end of stream");
  out.push(latencyTable(all, "stream", "end"));
  out.push("### Rates, errors and CPU per request");
  out.push(ratesTable(start));
  out.push(
    `_worker's own duration_ is the decision line's \`duration_ms\` (from the handler's start to the end of the relay), on the worker's clock, which advances in whole milliseconds. ` +
      `Idle CPU subtracted (ms per second): ${idleText(start)}. _client lag_ is how late the generator wrote requests against their schedule.`,
  );
  out.push(`One at a time, by round (${start.rounds.length} rounds in one boot): ${roundsText(start)}.`);

  if (r.dev) {
    const dev = r.dev;
    const dseq = medianRound(dev.rounds);
    out.push("## The same workers under wrangler dev (secondary: what npm start ran before)");
    out.push(
      "The same generated workers under `wrangler dev`, measured the same way in the same run: the development stack's figures, " +
        "kept to show what `npm start` no longer pays, and what every test, benchmark or demo that booted scripts/system.ts with its default runtime paid. " +
        "Not a target: wrangler dev stays where a developer edits a worker's code (`npm run dev`, which rebuilds on every save).",
    );
    const row = (name: string, s: StepRow) => [
      name,
      rateLabel(s),
      signed(added(s, "json", "end50")),
      signed(added(s, "json", "end99")),
      signed(added(s, "stream", "ttfb50")),
      signed(added(s, "json", "end50", "plain")),
      ratioText(plainProxyRatio(added(s, "json", "end50"), added(s, "json", "end50", "plain"))),
      f(routerCpu(s)),
      `${f(s.achieved.router, 0)}${Object.keys(s.errors.router).length ? ` (errors: ${errorsText(s.errors.router)})` : ""}`,
      f(s.otherCores),
    ];
    const startAt = (offered: number | undefined) => start.steps.find((s) => s.offered === offered);
    const rows: string[][] = [row("`npm start` (workerd-single)", seq), row("wrangler dev", dseq)];
    for (const s of dev.steps) {
      const same = startAt(s.offered);
      if (same) rows.push(row("`npm start` (workerd-single)", same));
      rows.push(row("wrangler dev", s));
    }
    out.push(
      table(
        [
          "system",
          "offered (req/s a path)",
          "router added p50",
          "router added p99",
          "router added TTFB p50 stream",
          "plain proxy added p50",
          "ratio p50",
          "router CPU ms/req (all its processes)",
          "router achieved (req/s)",
          "other load (cores)",
        ],
        rows,
      ),
    );
    out.push("#### wrangler dev: rates, errors and CPU per request");
    out.push(ratesTable(dev));
    out.push(`Idle CPU subtracted (ms per second): ${idleText(dev)}.`);
  }

  const events = [
    ...Object.entries(start.events).map(([k, n]) => [`npm start: ${k}`, n] as const),
    ...Object.entries(r.dev?.events ?? {}).map(([k, n]) => [`wrangler dev: ${k}`, n] as const),
  ].filter(([k]) => !/node_(de)?registered$/.test(k));
  if (events.length > 0)
    out.push(`Router log events other than request lines during the run: ${events.map(([k, n]) => `${k} ${n}`).join(", ")}.`);
  const restarts = [...start.restarts.map((x) => `npm start, ${x}`), ...(r.dev?.restarts ?? []).map((x) => `wrangler dev, ${x}`)];
  if (restarts.length > 0)
    out.push(`Processes replaced during a step (that step's CPU figure for them is omitted): ${restarts.join("; ")}.`);
  return out.join("\n\n") + "\n";
}
