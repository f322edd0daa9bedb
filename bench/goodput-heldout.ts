/**
 * Issue 30's targets on draws of the mix this repository was not developed on: `node
 * bench/goodput-heldout.ts [--seeds 1,2,3] [--jobs 2]` (npm run bench:goodput-heldout).
 *
 * bench/GOODPUT.md's mix is one draw of its tenants (their seeds in bench/workloads/generator.ts).
 * Every choice in the admission code was measured on that draw, so a target it meets there may be
 * met by the draw's luck. This runs the whole mix sweep again (bench/goodput.ts `--workload mix
 * --seed N`: the same tenants, classes and rates, other users, sessions, documents and arrivals;
 * the protections tuned again on each draw) once per seed, and writes bench/GOODPUT-HELDOUT.md:
 * every target's verdict and figure per draw beside the committed draw's. Each draw's own report
 * stays in .tmp/goodput-heldout/seed-N/ (not committed). About 21 minutes a draw on 2 cores.
 *
 * Every column is computed from the sources of the tree this runs in (bench/source-digest.ts): the
 * committed draw's is bench/goodput.json's when that file was made from them, else that draw runs
 * here too (into .tmp/goodput-heldout/seed-0/, 21 minutes more); `--render` refuses a draw left by
 * other sources.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { Verdict } from "./goodput/report.ts";
import { GOODPUT_ENTRY, sourceDigest } from "./source-digest.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const OUT = join(REPO, "bench", "GOODPUT-HELDOUT.md");
const COMMITTED = join(REPO, "bench", "goodput.json");

const { values } = parseArgs({
  options: {
    seeds: { type: "string", default: "1,2,3" },
    jobs: { type: "string", default: "2" },
    /** Writes GOODPUT-HELDOUT.md again from the draws already in .tmp/goodput-heldout/ (their run time from the file it replaces), without running them. */
    render: { type: "boolean", default: false },
  },
  strict: true,
});
const seeds = values.seeds!.split(",").map(Number);
if (seeds.some((s) => !Number.isSafeInteger(s) || s <= 0))
  throw new Error(`--seeds takes whole numbers > 0 (0 is the committed draw), not ${values.seeds}`);

const drawDir = (seed: number) => join(REPO, ".tmp", "goodput-heldout", `seed-${seed}`);
const drawFile = (seed: number) => join(drawDir(seed), "goodput.json");

/** Taken before any draw runs: the sources as loaded by the draws (bench/source-digest.ts). */
const source = sourceDigest(REPO, [GOODPUT_ENTRY]);
interface Results {
  command?: string;
  source?: string;
  verdicts: Verdict[];
}
const read = (file: string): Results => JSON.parse(readFileSync(file, "utf8")) as Results;
/**
 * bench/goodput.json, when this tree computed it with the committed run's command (a run with
 * fewer loads, noises or floods, or without tuning, has other verdicts); else the committed draw
 * is run here (seed 0).
 */
const committed = existsSync(COMMITTED) ? read(COMMITTED) : undefined;
const committedHere = committed?.source === source && committed.command === "node bench/goodput.ts";
const draws = committedHere ? seeds : [0, ...seeds];

function runDraw(seed: number): Promise<void> {
  const args = [
    join(REPO, "bench", "goodput.ts"),
    "--workload",
    "mix",
    "--seed",
    String(seed),
    "--jobs",
    values.jobs!,
    "--out",
    drawDir(seed),
  ];
  process.stderr.write(`seed ${seed}: node ${args.map((a) => a.replace(REPO + "/", "")).join(" ")}\n`);
  return new Promise((ok, fail) => {
    const child = spawn(process.execPath, args, { cwd: REPO, stdio: ["ignore", "ignore", "inherit"] });
    child.once("error", fail);
    child.once("exit", (code) => (code === 0 ? ok() : fail(new Error(`the draw with seed ${seed} exited ${code}`))));
  });
}

/** A draw's verdicts, refused unless this tree's sources computed them (a draw left by an earlier run). */
const verdictsOf = (file: string): Verdict[] => {
  if (!existsSync(file)) throw new Error(`${file.replace(REPO + "/", "")} is missing: run its draw (without --render)`);
  const results = read(file);
  if (results.source !== source)
    throw new Error(
      `${file.replace(REPO + "/", "")} was computed from other sources (${results.source ?? "no digest"}, this tree's are ${source}): run its draw again`,
    );
  return results.verdicts;
};

/**
 * A target's name without the figures that vary by draw (the batch tenant's share of the prefill
 * in the interactive target), so that the same target lines up across draws.
 */
const targetKey = (v: Verdict) => `${v.noise}|${v.target.replace(/ \(batch [\d.]+% of the prefill\)/, "")}`;

const started = performance.now();
if (!committedHere && !values.render)
  process.stderr.write(`bench/goodput.json was not computed from this tree's sources (${source}): the committed draw runs here too\n`);
if (!values.render) for (const seed of draws) await runDraw(seed);
const minutes = values.render
  ? (/; (\d+) minutes on/.exec(readFileSync(OUT, "utf8"))?.[1] ?? "?")
  : ((performance.now() - started) / 60_000).toFixed(0);

const columns: Array<{ name: string; verdicts: Map<string, Verdict> }> = [
  {
    name: "committed draw",
    verdicts: new Map(
      verdictsOf(committedHere ? COMMITTED : drawFile(0))
        .filter((v) => v.workload === "mix")
        .map((v) => [targetKey(v), v]),
    ),
  },
  ...seeds.map((s) => ({
    name: `seeds +${s}`,
    verdicts: new Map(verdictsOf(drawFile(s)).map((v) => [targetKey(v), v])),
  })),
];
const keys = [...columns[0]!.verdicts.keys()];
const cell = (v: Verdict | undefined) => (v ? `${v.met ? "PASS" : "**FAIL**"}: ${v.figure}` : "-");
const misses = (c: (typeof columns)[number]) => [...c.verdicts.values()].filter((v) => !v.met).length;

/** The command as run (`--render` rewrites what a run wrote: the run's command is the one to name). */
const args = process.argv.slice(2).filter((a) => a !== "--render");
const L = [
  "# Goodput targets on draws of the mix not developed on",
  "",
  `Generated by \`node bench/goodput-heldout.ts${args.length ? " " + args.join(" ") : ""}\` (\`npm run bench:goodput-heldout\`, from the repository root; ${minutes} minutes on 2 shared cores). Do not edit by hand.`,
  "",
  "bench/GOODPUT.md's mix is one draw of its five tenants, and every choice in the admission code was measured on it. Here the whole mix sweep (bench/goodput.ts `--workload mix --seed N`: offered loads x0.5 to x3, noise 0 and 1, every router, the protections tuned again on each draw, every tenant's flood) runs again on other draws: the same tenants, classes, rates and size ranges, every tenant's seed shifted by N x 1,000 (past the spacing of the tenants' own seeds, so no tenant is handed another's random stream), so other users, sessions, documents and arrivals. Each draw's full report is left in `.tmp/goodput-heldout/seed-N/GOODPUT.md`. The committed draw's column is bench/goodput.json's when that file was computed from the same sources (bench/source-digest.ts), else that draw is run too; every column here was computed from sources " +
    source +
    ".",
  "",
  `Targets missed: ${columns.map((c) => `${c.name} ${misses(c)} of ${c.verdicts.size}`).join("; ")}.`,
  "",
  `| noise | target | ${columns.map((c) => c.name).join(" | ")} |`,
  `| ---: | --- | ${columns.map(() => "---").join(" | ")} |`,
  ...keys.map((k) => {
    const [noise, ...rest] = k.split("|");
    return `| ${noise} | ${rest.join("|")} | ${columns.map((c) => cell(c.verdicts.get(k))).join(" | ")} |`;
  }),
  "",
];
writeFileSync(OUT, L.join("\n"));
process.stderr.write(`wrote ${OUT}\n`);
