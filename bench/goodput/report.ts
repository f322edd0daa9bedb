/**
 * bench/GOODPUT.md, its charts and goodput.json, from the runs' figures. Every verdict is computed
 * here from this run's figures; nothing is written by hand except the prose that does not depend
 * on them.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { FleetConfig } from "../fleet.ts";
import { lineChart, type Series } from "../svg.ts";
import type { Capacity } from "./harness.ts";
import type { GoodputRun, GroupFigures } from "./metrics.ts";
import type { RouterEntry } from "./routers.ts";

export interface WorkloadReport {
  name: string;
  description: string;
  requests: number;
  capacity: Capacity;
  entries: RouterEntry[];
  /** The tuned protections and every grid configuration's tuning score. */
  tuned: { smg: string; dynamo: string };
  tuningScores: Array<[string, number]>;
  tuningRuns: GoodputRun[];
}

export interface FloodReport {
  tenant: string;
  factor: number;
  load: number;
  runs: GoodputRun[];
  /**
   * A flood after history: it starts at this time (s, trace time), after the tenants' own rates,
   * and every run is measured over the requests from then on; compared with `baseRuns` (the same
   * mix without the flood, the same window) instead of the sweep's run.
   */
  fromSeconds?: number;
  baseRuns?: GoodputRun[];
}

export interface ReportInput {
  outDir: string;
  command: string;
  /** The digest of the sources that computed these figures (bench/source-digest.ts), for goodput.json's readers. */
  source: string;
  quick: boolean;
  fleet: FleetConfig;
  loads: number[];
  noises: number[];
  workloads: WorkloadReport[];
  runs: GoodputRun[];
  floods: FloodReport[];
  /** The full run's measured duration, stated in the document (a constant: the file must be deterministic). */
  runtimeNote: string;
}

const pct = (x: number) => (Number.isFinite(x) ? (x * 100).toFixed(1) + "%" : "-");
const ratio = (x: number) => (Number.isFinite(x) ? (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2)) + "x" : "-");
const CLASSES = ["interactive", "standard", "batch"];

function find(runs: readonly GoodputRun[], w: string, load: number, noise: number, router: string): GoodputRun | undefined {
  return runs.find((r) => r.workload === w && r.load === load && r.noise === noise && r.router === router);
}

/** One target's verdict on a run (goodput.json `verdicts`; bench/goodput-heldout.ts reads them). */
export interface Verdict {
  workload: string;
  noise: number;
  target: string;
  figure: string;
  met: boolean;
}

/** The issue's targets, each from this run's figures. */
export function verdicts(input: Pick<ReportInput, "workloads" | "runs" | "floods" | "loads" | "noises">): Verdict[] {
  const out: Verdict[] = [];
  for (const w of input.workloads) {
    const defaults = w.entries.filter((e) => e.group === "default").map((e) => e.name);
    const protections = w.entries.filter((e) => e.group === "protection").map((e) => e.name);
    for (const noise of input.noises) {
      const get = (load: number, router: string) => find(input.runs, w.name, load, noise, router);
      const best = (load: number, names: string[]) => {
        let top: GoodputRun | undefined;
        for (const n of names) {
          const r = get(load, n);
          if (r && (!top || r.all.goodput > top.all.goodput)) top = r;
        }
        return top;
      };
      for (const load of [2, 3]) {
        const wp = get(load, "warmpath");
        const oracle = get(load, "slo-oracle");
        if (wp && oracle) {
          const bound = 0.9 * oracle.all.goodput;
          out.push({
            workload: w.name,
            noise,
            target: `x${load}: goodput >= 0.9x the SLO-aware oracle`,
            figure: `${pct(wp.all.goodput)} vs oracle ${pct(oracle.all.goodput)} (${ratio(wp.all.goodput / oracle.all.goodput)})`,
            met: wp.all.goodput >= bound,
          });
        }
      }
      const wp3 = get(3, "warmpath");
      const d3 = best(3, defaults);
      const p3 = best(3, protections);
      if (wp3 && d3) {
        out.push({
          workload: w.name,
          noise,
          target: "x3: goodput >= 5x the best anchor's default",
          figure: `${pct(wp3.all.goodput)} vs ${d3.router} ${pct(d3.all.goodput)} (${ratio(wp3.all.goodput / d3.all.goodput)})`,
          met: wp3.all.goodput >= 5 * d3.all.goodput,
        });
      }
      if (wp3 && p3) {
        out.push({
          workload: w.name,
          noise,
          target: "x3: goodput >= 1.5x the best opt-in protection",
          figure: `${pct(wp3.all.goodput)} vs ${p3.router} ${pct(p3.all.goodput)} (${ratio(wp3.all.goodput / p3.all.goodput)})`,
          met: wp3.all.goodput >= 1.5 * p3.all.goodput,
        });
      }
      for (const load of input.loads.filter((l) => l <= 1)) {
        const a = get(load, "warmpath");
        const b = get(load, "warmpath-no-admission");
        if (!a || !b) continue;
        out.push({
          workload: w.name,
          noise,
          target: `x${load}${load === 1 ? " (saturation)" : ""}: no loss vs warmpath without admission (within 1 point)`,
          figure: `${pct(a.all.goodput)} vs ${pct(b.all.goodput)} (${((a.all.goodput - b.all.goodput) * 100).toFixed(1)} points)`,
          met: a.all.goodput >= b.all.goodput - 0.01,
        });
      }
      const wp2 = get(2, "warmpath");
      const inter = wp2?.byClass["interactive"];
      if (inter && wp2!.byClass["batch"]) {
        out.push({
          workload: w.name,
          noise,
          target: `x2: interactive goodput >= 95% (batch ${pct(w.capacity.classShares["batch"] ?? NaN)} of the prefill)`,
          figure: pct(inter.goodput),
          met: inter.goodput >= 0.95,
        });
      }
    }
  }
  // The target is warmpath's as configured by default; with commitments (warmpath-committed,
  // when the workload has them) it is checked too, as its own rows.
  for (const [router, how] of [
    ["warmpath", ""],
    ["warmpath-committed", ", tenants with commitments"],
  ] as const) {
    for (const f of input.floods) {
      const worst = floodWorst(input.runs, f, router);
      if (!worst) continue;
      out.push({
        workload: f.runs[0]?.workload ?? "mix",
        noise: 0,
        target: `flood (${floodName(f)}${how}): every other tenant keeps >= 90% of its goodput`,
        figure: `worst: ${worst.tenant} ${pct(worst.with)} vs ${pct(worst.without)} (${(worst.ratio * 100).toFixed(1)}%)`,
        met: worst.ratio >= 0.9,
      });
    }
  }
  return out;
}

/** A flood as the targets name it: its tenant, factor and load, and its start after history. */
function floodName(f: FloodReport): string {
  return `${f.tenant} x${f.factor}${f.fromSeconds ? ` from ${f.fromSeconds} s` : ""} at x${f.load}`;
}

/** Per other tenant: goodput without and with the flood, and the ratio; sorted worst first. */
function floodRows(runs: readonly GoodputRun[], f: FloodReport, router: string) {
  const base = f.baseRuns ? f.baseRuns.find((r) => r.router === router) : find(runs, f.runs[0]?.workload ?? "mix", f.load, 0, router);
  const flooded = f.runs.find((r) => r.router === router);
  if (!base || !flooded) return undefined;
  const rows = Object.keys(base.byTenant)
    .filter((t) => t !== f.tenant)
    .map((t) => {
      const without = base.byTenant[t]!.goodput;
      const withF = flooded.byTenant[t]?.goodput ?? NaN;
      return { tenant: t, without, with: withF, ratio: without > 0 ? withF / without : NaN };
    });
  return { rows, flooder: { without: base.byTenant[f.tenant]?.goodput ?? NaN, with: flooded.byTenant[f.tenant]?.goodput ?? NaN } };
}

function floodWorst(runs: readonly GoodputRun[], f: FloodReport, router: string) {
  const r = floodRows(runs, f, router);
  if (!r) return undefined;
  return [...r.rows].sort((a, b) => a.ratio - b.ratio)[0];
}

/** A markdown table; the first `left` columns left-aligned (text), the rest right-aligned (figures). */
function table(header: string[], rows: string[][], left = 1): string {
  const out = [`| ${header.join(" | ")} |`, `|${header.map((_, i) => (i < left ? "---" : "---:")).join("|")}|`];
  for (const r of rows) out.push(`| ${r.join(" | ")} |`);
  return out.join("\n");
}

function goodputTable(input: ReportInput, w: WorkloadReport, noise: number, pick: (r: GoodputRun) => number): string {
  const rows = w.entries.map((e) => [
    e.name,
    ...input.loads.map((load) => {
      const r = find(input.runs, w.name, load, noise, e.name);
      return r ? pct(pick(r)) : "-";
    }),
  ]);
  return table(["router", ...input.loads.map((l) => `x${l}`)], rows);
}

function classTable(input: ReportInput, w: WorkloadReport, noise: number, cls: string): string {
  const rows = w.entries.map((e) => [
    e.name,
    ...input.loads.map((load) => {
      const g = find(input.runs, w.name, load, noise, e.name)?.byClass[cls];
      return g ? pct(g.goodput) : "-";
    }),
  ]);
  return table(["router", ...input.loads.map((l) => `x${l}`)], rows);
}

function tenantTable(input: ReportInput, w: WorkloadReport, noise: number, load: number): string {
  const any = find(input.runs, w.name, load, noise, "warmpath") ?? input.runs.find((r) => r.workload === w.name);
  const tenants = Object.keys(any?.byTenant ?? {});
  const rows = w.entries.map((e) => {
    const r = find(input.runs, w.name, load, noise, e.name);
    return [e.name, ...tenants.map((t) => (r?.byTenant[t] ? pct(r.byTenant[t]!.goodput) : "-"))];
  });
  return table(["router", ...tenants], rows);
}

function refusedText(g: GroupFigures): string {
  const parts = Object.entries(g.refusedBy).map(([k, v]) => `${k} ${v}`);
  return parts.length ? parts.join(", ") : "0";
}

/** Requests in time with one run and not the other, request by request (both runs keep outcomes). */
function compareOutcomes(a: GoodputRun | undefined, b: GoodputRun | undefined) {
  if (!a?.outcomes || !b?.outcomes || a.outcomes.length !== b.outcomes.length) return undefined;
  let lostRefused = 0;
  let lostLate = 0;
  let gained = 0;
  for (let i = 0; i < a.outcomes.length; i++) {
    const x = a.outcomes[i];
    const y = b.outcomes[i];
    if (y === "g" && x === "r") lostRefused++;
    else if (y === "g" && x === "l") lostLate++;
    else if (x === "g" && y !== "g") gained++;
  }
  return { lostRefused, lostLate, gained };
}

function diagnostics(input: ReportInput, w: WorkloadReport): string {
  const hasClasses = w.capacity.classShares["batch"] !== undefined;
  const rows: string[][] = [];
  for (const noise of input.noises) {
    for (const load of input.loads) {
      const r = find(input.runs, w.name, load, noise, "warmpath");
      if (!r) continue;
      const cmp = compareOutcomes(r, find(input.runs, w.name, load, noise, "warmpath-no-admission"));
      const groups: Array<[string, GroupFigures]> = hasClasses
        ? CLASSES.filter((c) => r.byClass[c]).map((c) => [c, r.byClass[c]!])
        : [["all", r.all]];
      for (const [name, g] of groups) {
        rows.push([
          `x${load}`,
          String(noise),
          name,
          String(g.offered),
          pct(g.goodput),
          String(g.late),
          refusedText(g),
          name === groups[0]![0] && r.all.late > 0 ? `${(r.lateMeanMs / 1000).toFixed(2)} s` : "",
          name === groups[0]![0] ? `${r.heldPlaced} / ${(r.heldMeanMs / 1000).toFixed(2)} s` : "",
          name === groups[0]![0] && cmp ? `${cmp.gained} / ${cmp.lostRefused} / ${cmp.lostLate}` : "",
        ]);
      }
    }
  }
  return table(
    [
      "load",
      "noise",
      "class",
      "offered",
      "goodput",
      "late",
      "refused (reason: count)",
      "mean lateness (all classes)",
      "held then placed / mean hold",
      "vs no admission: gained / lost refused / lost late",
    ],
    rows,
    3,
  );
}

function floodSection(input: ReportInput, f: FloodReport, entries: RouterEntry[]): string {
  const lines: string[] = [];
  const sample = floodRows(input.runs, f, "warmpath");
  const tenants = sample?.rows.map((r) => r.tenant) ?? [];
  const rows: string[][] = [];
  for (const e of entries) {
    const r = floodRows(input.runs, f, e.name);
    if (!r) continue;
    const worst = [...r.rows].sort((a, b) => a.ratio - b.ratio)[0]!;
    rows.push([
      e.name,
      ...tenants.map((t) => {
        const x = r.rows.find((y) => y.tenant === t)!;
        return `${pct(x.without)} -> ${pct(x.with)}`;
      }),
      `${(worst.ratio * 100).toFixed(1)}% (${worst.tenant})`,
      `${pct(r.flooder.without)} -> ${pct(r.flooder.with)}`,
    ]);
  }
  lines.push(table(["router", ...tenants.map((t) => `${t}: without -> with`), "worst kept", `${f.tenant} itself`], rows));
  return lines.join("\n");
}

/**
 * The chart's routers: warmpath with and without admission, each anchor's default, each anchor's
 * best protection on this workload and noise (mean goodput over the loads), the oracle. Every row
 * is in the tables.
 */
function chartEntries(input: ReportInput, w: WorkloadReport, noise: number): RouterEntry[] {
  const mean = (e: RouterEntry) =>
    input.loads.reduce((a, load) => a + (find(input.runs, w.name, load, noise, e.name)?.all.goodput ?? 0), 0) / input.loads.length;
  const best = new Map<string, RouterEntry>();
  for (const e of w.entries) {
    if (e.group !== "protection" || e.anchor === undefined) continue;
    const b = best.get(e.anchor);
    if (!b || mean(e) > mean(b)) best.set(e.anchor, e);
  }
  const keep = new Set(best.values());
  return w.entries.filter((e) => e.group !== "protection" || keep.has(e));
}

function chart(input: ReportInput, w: WorkloadReport, noise: number): string {
  const series: Series[] = chartEntries(input, w, noise).map((e) => ({
    name: e.name,
    points: input.loads
      .map((load) => [load, find(input.runs, w.name, load, noise, e.name)?.all.goodput ?? NaN] as [number, number])
      .filter(([, y]) => Number.isFinite(y)),
    dashed: e.group === "protection" || e.group === "reference",
  }));
  return lineChart(
    `${w.name}: goodput vs offered load${noise > 0 ? ` (noise sigma ${noise})` : ""}`,
    "offered load (x the fleet's capacity)",
    "goodput",
    series,
    {
      min: 0,
      max: 1,
      ticks: [0, 0.2, 0.4, 0.6, 0.8, 1],
      label: (v) => `${Math.round(v * 100)}%`,
    },
  );
}

export function chartName(w: string, noise: number): string {
  return `goodput-${w}${noise > 0 ? `-noise${noise}` : ""}.svg`;
}

export function writeReport(input: ReportInput): void {
  const { outDir } = input;
  mkdirSync(join(outDir, "charts"), { recursive: true });
  const L: string[] = [];
  const v = verdicts(input);
  L.push("# Goodput past saturation");
  L.push("");
  L.push(
    `Generated by \`${input.command}\` (from the repository root${input.quick ? "; the quick slice" : "; `npm run bench:goodput`"}). Do not edit by hand: every figure and verdict below is computed by bench/goodput/report.ts from this run. Deterministic: the same command gives the same files.`,
  );
  L.push("");
  L.push(input.runtimeNote);
  L.push("");
  L.push(...PROSE_RUN);
  L.push("");
  L.push("## Definitions");
  L.push("");
  L.push(...PROSE_DEFINITIONS);
  L.push("");
  L.push(
    `Fleet: ${input.fleet.nodes} nodes, ${input.fleet.capacityTokens.toLocaleString("en-US")} KV tokens each, prefill ${input.fleet.prefillRate.toLocaleString("en-US")} tokens/s, decode ${input.fleet.decodeRate} tokens/s, ${input.fleet.slots} slots, load reports every ${input.fleet.reportIntervalMs} ms (bench/fleet.ts). Noise: ${input.noises.map((n) => (n === 0 ? "none" : `lognormal sigma ${n} (hidden prefill-time noise, mean 1)`)).join(" and ")}.`,
  );
  L.push("");
  L.push(
    table(
      ["workload", "requests", "1x = arrival rate x", "oracle busy at 1x", "pooled reference 100% busy at", "prefill share by class at 1x"],
      input.workloads.map((w) => [
        w.name,
        String(w.requests),
        w.capacity.speed.toString(),
        pct(w.capacity.oracleBusy),
        `x${w.capacity.pooledSpeed}`,
        Object.entries(w.capacity.classShares)
          .map(([c, s]) => `${c} ${pct(s)}`)
          .join(", "),
      ]),
      1,
    ),
  );
  L.push("");
  for (const w of input.workloads) L.push(`- **${w.name}**: ${w.description}.`);
  L.push("");
  L.push("## Routers");
  L.push("");
  const first = input.workloads.find((w) => w.entries.some((e) => e.name === "llm-d-admitter")) ?? input.workloads[0]!;
  L.push(
    table(
      ["router", "group", "what"],
      first.entries.map((e) => [e.name, e.group, e.description]),
      3,
    ),
  );
  L.push("");
  L.push(...PROSE_ANCHORS);
  L.push("");
  L.push("## Targets");
  L.push("");
  L.push(
    table(
      ["workload", "noise", "target", "measured", "verdict"],
      v.map((x) => [x.workload, String(x.noise), x.target, x.figure, x.met ? "PASS" : "**FAIL**"]),
      5,
    ),
  );
  L.push("");
  L.push(`${v.filter((x) => x.met).length} of ${v.length} target checks pass.`);
  L.push("");
  for (const w of input.workloads) {
    L.push(`## ${w.name}`);
    L.push("");
    for (const noise of input.noises) {
      L.push(`![${w.name} goodput against offered load${noise > 0 ? `, noise sigma ${noise}` : ""}](charts/${chartName(w.name, noise)})`);
      L.push("");
      L.push(
        `Goodput against offered load${noise > 0 ? ` with hidden noise (sigma ${noise})` : ", no noise"}: warmpath with and without admission, each anchor's default, each anchor's best protection on this chart (dashed), the SLO-aware oracle (dashed). Every router is in the tables below.`,
      );
      L.push("");
      writeFileSync(join(outDir, "charts", chartName(w.name, noise)), chart(input, w, noise));
    }
    for (const noise of input.noises) {
      const n = noise === 0 ? "no noise" : `noise sigma ${noise}`;
      L.push(`### Goodput (share of requests within objective), ${n}`);
      L.push("");
      L.push(goodputTable(input, w, noise, (r) => r.all.goodput));
      L.push("");
      L.push(`### Token-weighted goodput, ${n}`);
      L.push("");
      L.push(goodputTable(input, w, noise, (r) => r.all.tokenGoodput));
      L.push("");
    }
    if (w.capacity.classShares["batch"] !== undefined) {
      for (const noise of input.noises) {
        for (const cls of CLASSES) {
          L.push(`### ${cls} goodput${noise > 0 ? `, noise sigma ${noise}` : ""}`);
          L.push("");
          L.push(classTable(input, w, noise, cls));
          L.push("");
        }
      }
      for (const load of input.loads.filter((l) => l >= 2)) {
        L.push(`### Goodput per tenant at x${load}, no noise`);
        L.push("");
        L.push(tenantTable(input, w, 0, load));
        L.push("");
      }
    }
    L.push(`### warmpath: what happened to the requests it did not answer in time`);
    L.push("");
    L.push(
      "Per load (and class): late = placed on a node and answered after its objective; refused by reason (`shed:objective` at arrival, `shed:deadline` while queued, `shed:queue-full`; `saturated` and `over-share` are the placement's own refusals). The last column compares each request with the run without admission: in time only with admission / refused with admission but in time without / late with admission but in time without.",
    );
    L.push("");
    L.push(diagnostics(input, w));
    L.push("");
  }
  if (input.floods.length > 0) {
    L.push("## One tenant floods");
    L.push("");
    L.push(...PROSE_FLOOD);
    L.push("");
    const mix = input.workloads.find((w) => w.name === "mix");
    for (const f of input.floods) {
      const since = f.fromSeconds
        ? ` from ${f.fromSeconds} s, after its own rate (measured from ${f.fromSeconds} s)`
        : " from its first request";
      L.push(`### ${f.tenant} at ${f.factor}x its rate${since}, on the mix at x${f.load} (no noise)`);
      L.push("");
      L.push(floodSection(input, f, mix?.entries ?? []));
      L.push("");
    }
  }
  L.push("## Tuning the opt-in protections");
  L.push("");
  L.push(...PROSE_TUNING);
  L.push("");
  for (const w of input.workloads) {
    L.push(`### ${w.name}: tuned ${w.tuned.smg}; ${w.tuned.dynamo}`);
    L.push("");
    L.push(
      table(
        ["configuration", "mean goodput at x2 and x3"],
        w.tuningScores.map(([n, s]) => [n, pct(s)]),
      ),
    );
    L.push("");
  }
  writeFileSync(join(outDir, "GOODPUT.md"), L.join("\n"));
  writeFileSync(join(outDir, "goodput.json"), resultsJson(input, v));
}

/**
 * goodput.json: every run's figures, one run a line, numbers to 6 significant digits (the tuning
 * runs are summarised by their scores in `workloads[].tuningScores`; a one-class workload without
 * tenants has no `byClass` or `byTenant`, which would repeat `all`).
 */
function resultsJson(input: ReportInput, verdictList: Verdict[]): string {
  const round = (_k: string, x: unknown) =>
    typeof x === "number" && Number.isFinite(x) && !Number.isInteger(x) ? Number(x.toPrecision(6)) : x;
  const line = (x: unknown) => JSON.stringify(x, round);
  // A workload of one class and no tenants (the trace): its class and tenant figures are `all`'s.
  const strip = (r: GoodputRun) => {
    const { wallMs, outcomes, byClass, byTenant, ...rest } = r;
    void wallMs;
    void outcomes;
    return {
      ...rest,
      ...(Object.keys(byClass).length > 1 ? { byClass } : {}),
      ...(Object.keys(byTenant).length > 1 || byTenant["-"] === undefined ? { byTenant } : {}),
    };
  };
  const list = (xs: unknown[]) => (xs.length === 0 ? "[]" : `[\n${xs.map(line).join(",\n")}\n]`);
  const parts = [
    `"command": ${line(input.command)}`,
    `"source": ${line(input.source)}`,
    `"fleet": ${line(input.fleet)}`,
    `"workloads": ${list(input.workloads.map(({ tuningRuns, ...w }) => (void tuningRuns, w)))}`,
    `"runs": ${list(input.runs.map(strip))}`,
    `"floods": ${list(input.floods.map((f) => ({ ...f, runs: f.runs.map(strip), ...(f.baseRuns ? { baseRuns: f.baseRuns.map(strip) } : {}) })))}`,
    `"verdicts": ${list(verdictList)}`,
  ];
  return `{\n${parts.join(",\n")}\n}\n`;
}

const PROSE_RUN = [
  "## Running it",
  "",
  "`npm run bench:goodput` (bench/goodput.ts) writes this file, `bench/goodput.json` and `bench/charts/goodput-*.svg`. Flags: `--quick` (the CI slice: the trace's first 3,000 requests, 150 s of the mix, x0.5/x2/x3, no noise, one tenant's flood from its first request and from 300 s for 150 s; writes `.tmp/goodput-quick/`, never the committed results), `--workload mooncake,mix`, `--loads 0.5,1,1.5,2,2.5,3`, `--noise 0,1`, `--jobs N` (worker threads; the output does not depend on it), `--no-tune` (the protections' grids are not run: the tuned rows take SMG's N=16 and Dynamo's documented example), `--no-flood`, `--trace PATH`, `--seed N` (the mix drawn anew, every tenant's seed shifted by N x 1,000: a held-out check, written to `.tmp/goodput-seed-N/` unless `--out` says otherwise, never the committed results), `--out DIR`. The Mooncake trace is read from `../shared/traces/` (never copied here); without it the run skips that workload with a warning.",
];

const PROSE_DEFINITIONS = [
  "- **Objective** of a request: a time to first token. Default `max(1 s, 5 x its cold prefill time)`, the cold prefill being its whole prompt at the fleet's TRUE prefill rate, the same for every router (bench/fleet.ts `objectiveMs`); the mix's batch tenant has a configured objective of 60 s, which warmpath is told (`objectiveMs`) and every router is scored by. warmpath computes its own objectives with its learned rate; the score does not.",
  "- **Goodput**: the share of ALL requests, refused ones included, whose first token came within its objective; also weighted by prompt tokens (so refusing long prompts is no way up). A refusal is a miss, whatever its code (429, 408, 529, shed).",
  "- **TTFT** in the simulation: arrival to end of prefill (router and network instantaneous, bench/fleet.ts); a request held in a router's queue (warmpath's region queue, SMG's limiter) waits from its arrival.",
  "- **Offered load 1x**: the arrival-rate multiplier at which the greedy oracle (true caches, queues and prefill times; bench/oracle.ts) keeps the fleet's prefill 100% busy, found by bisection once per workload without noise: the most load the 8 nodes can serve with a placement no router beats by much. The pooled reference (one node with all the cache and all the rate) would reach 100% at a somewhat higher rate (table below); no 8-node placement gets there. `npm run bench`'s speeds are not calibrated to capacity (its x1 is the trace's own rate), so this benchmark's x1 is not that one. Loads are multiples of 1x; \"below saturation\" is below 1x.",
];

const PROSE_ANCHORS = [
  "Each protection is implemented from its source, cited at the top of its file (bench/goodput/smg-limiter.ts, dynamo-busy.ts, llmd.ts), with its defaults; where a protection needs a signal the simulation lacks, its file says which faithful signal stands in. In short:",
  "",
  "- **SMG `--max-concurrent-requests`** (lightseekorg/smg 73da68c, v1.9.0): a token bucket of N tokens that also refills at N tokens/s by default; a token is held until the answer ends. Without a token, a request waits (the queue's channel is drained into one task per waiter at once, so `--queue-size 100` in effect never fills) until a token frees or `--queue-timeout-secs 60` passes (408); with the default refill, `TokenBucket::acquire` gives up after the refill time of the missing token, so most waiters get 408 within milliseconds. With `--queue-size 0`, 429 at once. It never looks at a request's objective: it bounds bursts (default refill) or concurrency (refill 0), so it only moves the queue from the nodes to the gateway.",
  "- **Dynamo's busy thresholds** (ai-dynamo/dynamo, lib/llm/src/discovery/worker_monitor.rs): opt-in, no defaults; the documented example `--active-decode-blocks-threshold 0.85 --active-prefill-tokens-threshold 10000` is the fixed row. Busy workers leave the routing set; when all are busy, 529.",
  "- **llm-d's probabilistic admitter** (llm-d/llm-d-inference-scheduler 520af47): sheddable requests (priority < 0; here the batch class, or every request in the `-all` row, the only way it acts on one-class traffic such as the trace) are rejected with probability `min(sat^5 x 300, 1)`, `sat` the mean over endpoints of `max(waiting / 5, KV usage / 0.8)`, so all of them once `sat` reaches 0.32; protected traffic always passes. Its placement is llm-d's default profile (queue 2, KV utilisation 2, prefix 3, max score).",
  "- **SLO-aware oracle**: greedy; it places each request on the node with the earliest true first token and refuses at arrival what would be late. It never holds a request and does not order by class or size, so a request with a loose objective (a long prompt, the batch tenant's 60 s) is admitted whenever it fits and then delays every later request on its node: past saturation it fills the queues with long work and refuses short requests. It is a reference, not a bound; its token-weighted goodput shows what it favours.",
];

const PROSE_FLOOD = [
  "The mix at x1 (noise 0), then the same with one tenant's session rate multiplied (several times its share of the load); every other tenant's requests are the same in both runs (each tenant has its own seed). For each router, each other tenant's goodput without and with the flood, and the worst ratio; the target is warmpath's worst ratio >= 90%, checked for warmpath as configured by default (no tenant has a commitment) and for `warmpath-committed` (each tenant committed the prompt tokens a minute it sends at x1, so the commitments add up to the fleet's capacity; docs/ADMISSION.md).",
  "",
  "Each flood twice. **From its first request**: the tenant floods from the start, so nothing but shares of the demand can tell it from a tenant that was always large (a flood within its share, rag-b's, is then not seen without commitments). **After its own rate**: the mix at every tenant's own rate for 600 s (the mix's length), then the tenant at five times its rate for 600 s more, everyone measured over the requests that arrive from 600 s on, beside the same window of the same 1,200 s mix without the flood: a flood as production meets one, a change from what the tenant sent before, which warmpath's default judges by each tenant's usual rate (src/core/region/tenant-growth.ts). Goodput at x1 over the longer mix is lower than over the first 600 s (the batch tenant's queue has longer to build), so the two kinds' figures are not comparable with each other, only each with its own baseline.",
];

const PROSE_TUNING = [
  "The anchors' opt-in protections have no defaults for their main knob (SMG's N; Dynamo's thresholds beyond the documented example), so each is also run with the configuration of a grid that did best on the same workload, without noise, at x2 and x3 (mean goodput): the `-tuned` rows. Tuning on the very runs that are scored gives the anchors more than an operator could have; the targets compare warmpath with the best protection row, tuned ones included. SMG grid: N in {16, 32, 64, 128, 256}, refill N/s (its default) or 0 (pure concurrency). Dynamo grid: prefill-tokens threshold in {2k, 5k, 10k (the documented example), 20k, 50k, 100k, 200k} with the documented 0.85 decode threshold.",
];
