/**
 * RESULTS.md's "Reading": what the run's figures say about issue 30's proof, written from the
 * report itself (pure), so a rerun can never leave a reading of other figures behind.
 *
 * The target (issue 30, "Proof"): through the real workers, warmpath's client-measured goodput at
 * 2x and 3x the fleet's capacity at least {@link TARGET_RATIO} times the naive prefix-affinity
 * router's in the same run.
 */
import type { Report, RunResult } from "./run.ts";
import { total } from "./score.ts";
import { pct, ratio, s } from "./format.ts";

/** warmpath's goodput over the naive router's, at least, at each of {@link TARGET_LOADS}. */
export const TARGET_RATIO = 2;
/** The loads (x the fleet's capacity) the target is read at. */
export const TARGET_LOADS = [2, 3] as const;

/** A run's late answers as a share of its answered ones at most this: "what it admits, it serves in time". */
const IN_TIME_SHARE = 0.01;

const list = (items: string[]) =>
  items.length <= 1 ? (items[0] ?? "") : `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
const range = (values: number[], digits: number) => {
  const lo = Math.min(...values).toFixed(digits);
  const hi = Math.max(...values).toFixed(digits);
  return lo === hi ? lo : `${lo}-${hi}`;
};

/** Requests a run answered 429 or 503. */
const refusedIn = (r: RunResult) => total(r.summary.refused429) + total(r.summary.refused503);
/** Requests a router's runs answered 429 or 503. */
const refusedBy = (runs: RunResult[]) => runs.reduce((a, r) => a + refusedIn(r), 0);

/**
 * Whether warmpath's own records account for every request but the lost: a decision line per
 * answer and a counted refusal per refusal means a lost request never reached a handler that answers.
 */
function reachedHandler(r: RunResult): string {
  if (!r.refusals) return "";
  const lines = total(r.decisions);
  const refusals = total(r.refusals);
  const answered = r.summary.answered;
  const refused = refusedIn(r);
  return lines === answered && refusals === refused
    ? `; warmpath wrote ${lines} decision lines and counted ${refusals} refusals, exactly the answered and refused requests, so the lost never reached a handler that answers`
    : `; warmpath wrote ${lines} decision lines and counted ${refusals} refusals, for ${answered} answered and ${refused} refused requests`;
}

/** Each lost request of a run, with what its client saw when the run kept it. */
function lostLine(r: RunResult): string {
  const n = total(r.summary.lost);
  const kinds = Object.entries(r.summary.lost)
    .map(([k, v]) => `${k}: ${v}`)
    .join(", ");
  const details = r.lostDetails ?? [];
  const seen = details.length
    ? details.map((d) => `request ${d.id}: ${d.code ?? "no code"}${d.detail ? ` (${d.detail.slice(0, 160)})` : ""}`).join("; ")
    : "this run's client kept no error message (results.json `lostDetails` is absent)";
  return `${r.router} at ${r.load}x lost ${n} (${kinds}): ${seen}${r.router === "warmpath" ? reachedHandler(r) : ""}`;
}

export function renderReading(rep: Report): string {
  const find = (router: string, load: number) => rep.runs.find((r) => r.router === router && r.load === load);
  const loads = [...new Set(rep.runs.map((r) => r.load))].sort((a, b) => a - b);
  const paired = loads.flatMap((load) => {
    const w = find("warmpath", load);
    const n = find("naive", load);
    return w && n ? [{ load, w, n }] : [];
  });
  const out: string[] = [];
  out.push(`Written by the generator from the figures above${rep.quick ? " (a quick run: a smoke test, not a measurement)" : ""}.`);

  // The target.
  const targeted = paired.filter((p) => (TARGET_LOADS as readonly number[]).includes(p.load));
  if (targeted.length === 0) {
    out.push(
      `**The proof's target** (warmpath's goodput at least ${TARGET_RATIO}x the naive router's at ${list(TARGET_LOADS.map((l) => `${l}x`))}) **cannot be read from this run**: it did not run both routers at those loads.`,
    );
  } else {
    const met = targeted.every((p) => p.w.summary.goodput >= TARGET_RATIO * p.n.summary.goodput && p.w.summary.goodput > 0);
    const missing = TARGET_LOADS.filter((l) => !targeted.some((p) => p.load === l));
    const at = targeted.map(
      (p) =>
        `${ratio(p.w.summary.goodput, p.n.summary.goodput)} at ${p.load}x (${pct(p.w.summary.goodput)} against ${pct(p.n.summary.goodput)})`,
    );
    const tokens = targeted.map((p) => ratio(p.w.summary.tokenGoodput, p.n.summary.tokenGoodput));
    out.push(
      `**The proof's target is ${met ? (missing.length ? "met where measured" : "met") : "missed"}** (warmpath's client-measured goodput at least ${TARGET_RATIO}x the naive prefix-affinity router's in the same run${missing.length ? `; not run at ${list(missing.map((l) => `${l}x`))}` : ""}): ${list(at)}; weighted by prompt tokens ${list(tokens)}.` +
        paired
          .filter((p) => p.load < 2)
          .map(
            (p) =>
              ` At ${p.load}x: ${pct(p.w.summary.goodput)} against ${pct(p.n.summary.goodput)} (tokens ${pct(p.w.summary.tokenGoodput)} against ${pct(p.n.summary.tokenGoodput)}).`,
          )
          .join(""),
    );
  }

  const bullets: string[] = [];
  // Refusals and lateness.
  const w = loads.flatMap((l) => find("warmpath", l) ?? []);
  const n = loads.flatMap((l) => find("naive", l) ?? []);
  if (w.length) {
    const codes = [...new Set(w.flatMap((r) => [...Object.keys(r.summary.refused429), ...Object.keys(r.summary.refused503)]))];
    const refused = w.map(refusedIn);
    const withRetry = w.map((r) => r.summary.refused429WithRetryAfter);
    const inTime = w.every((r) => r.summary.late <= IN_TIME_SHARE * Math.max(1, r.summary.answered));
    bullets.push(
      `**Refusals and lateness**: warmpath refused ${list(w.map((r, i) => `${refused[i]} at ${r.load}x`))}${codes.length ? ` (${codes.map((c) => `\`${c}\``).join(", ")})` : ""}, ${withRetry.reduce((a, b) => a + b, 0)} of its ${w.reduce((a, r) => a + total(r.summary.refused429), 0)} 429s with \`Retry-After\`, and answered ${list(w.map((r) => `${r.summary.late} late at ${r.load}x`))}${inTime ? ` (at most ${pct(Math.max(...w.map((r) => r.summary.late / Math.max(1, r.summary.answered))))} of its answers at any load: what it admits, it serves in time)` : ""}.` +
        (n.length
          ? ` The naive router ${refusedBy(n) ? `refused ${refusedBy(n)}` : "refused nothing"}; it answered ${list(n.map((r) => `${r.summary.late} late at ${r.load}x`))} and the client gave up on ${list(n.map((r) => `${r.summary.gaveUp} at ${r.load}x`))} (no first token after its give-up time).`
          : ""),
    );
  }
  // Lost requests.
  const lossy = rep.runs.filter((r) => total(r.summary.lost) > 0);
  bullets.push(
    lossy.length ? `**Lost** (no answer saying what happened): ${lossy.map(lostLine).join("; ")}.` : `**Lost**: none, by either router.`,
  );
  // Cache.
  if (paired.length) {
    bullets.push(
      `**Hit rate** (cached / prompt tokens of the answered requests), warmpath against naive: ${list(paired.map((p) => `${pct(p.w.summary.hitRate)} against ${pct(p.n.summary.hitRate)} at ${p.load}x`))}.`,
    );
  }
  // The twin.
  const twinned = w.flatMap((r) => {
    const t = rep.loads.find((l) => l.load === r.load)?.twin.find((x) => x.router === "warmpath");
    return t ? [{ load: r.load, live: r.summary.goodput, twin: t.goodput }] : [];
  });
  if (twinned.length) {
    const gap = Math.max(...twinned.map((t) => Math.abs(t.live - t.twin))) * 100;
    bullets.push(
      `**The live system against its simulated-time twin** on the same requests: ${list(twinned.map((t) => `${pct(t.live)} live against ${pct(t.twin)} at ${t.load}x`))}, at most ${gap.toFixed(1)} points apart (the twin: the production RegionRouter with an instantaneous network and no CPU of its own).`,
    );
  }
  out.push(bullets.map((b) => `- ${b}`).join("\n"));

  // Caveats, with this run's figures.
  const caveats: string[] = [];
  if (rep.loads.length) {
    const last = rep.loads.map((l) => l.traceSpanS / (l.load * l.capacity.speed * rep.plan.timeFactor));
    caveats.push(
      `**A finite overload.** Each load's arrivals last ${range(last, 0)} s, then the system drains, so goodput at 2x and 3x is higher than under an endless overload would be (for both routers; the twin shows the same). bench:goodput replays the whole trace.`,
    );
  }
  const tails = w.filter((r) => r.load >= 2 && r.summary.queuedP99Ms !== undefined);
  if (tails.length) {
    caveats.push(
      `**A long TTFT is not a late one.** An objective grows with its prompt (5 x its cold prefill time), so a long prompt may wait long and still be in time: warmpath's p99 TTFT was ${list(tails.map((r) => `${s(r.summary.ttftP99Ms)} at ${r.load}x (${r.summary.late} of ${r.summary.answered} answers late)`))}, its p99 time queued in the region ${list(tails.map((r) => `${s(r.summary.queuedP99Ms)} at ${r.load}x`))}.`,
    );
  }
  if (rep.runs.length) {
    caveats.push(
      `**The machine**: others' work used ${range(
        rep.runs.map((r) => r.cpu.other),
        2,
      )} cores during the runs (table above); the router's own CPU was ${
        w.length
          ? `${range(
              w.map((r) => r.cpu.routerMsPerRequest),
              0,
            )} ms per request for warmpath (the edge, the region worker and its object, each worker in its own process, and their hosts)`
          : ""
      }${w.length && n.length ? " against " : ""}${
        n.length
          ? `${range(
              n.map((r) => r.cpu.routerMsPerRequest),
              0,
            )} ms for the naive Node router`
          : ""
      }. Runtime ${(rep.durationS / 60).toFixed(1)} minutes for the command.`,
    );
  }
  if (caveats.length) out.push(`Caveats:\n\n${caveats.map((c) => `- ${c}`).join("\n")}`);
  return out.join("\n\n");
}
