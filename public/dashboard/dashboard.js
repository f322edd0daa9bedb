// warmpath dashboard: polls GET /admin/state every second and draws what the router decided and
// what the nodes measured. Plain JS, no dependencies; charts are SVG built here.
// @ts-check

const DECISIONS = ["prefix-hit", "session", "cold-spread", "hot-spill", "balance", "retry", "failover"];
const HISTORY = 120; // samples (seconds) kept for the charts
const PALETTE = ["#58a6ff", "#3fb950", "#f0883e", "#a371f7", "#d29922", "#f85149", "#39c5cf", "#db61a2", "#8b98a5"];

/** @type {{ t: number, measured: number | null, predicted: number | null, rps: Record<string, number> }[]} */
const history = [];
/** @type {any} */
let previous = null;
/** Recent snapshots (the last THROUGHPUT_WINDOW), to compute each node's token throughput. */
/** @type {any[]} */
const recent = [];
const THROUGHPUT_WINDOW = 10; // snapshots: token rates are averaged over about ten seconds

/**
 * Per node, prefill tokens computed and tokens generated per second over the recent window, from
 * the nodes' own usage (measured prompt minus cached tokens; completion tokens).
 * @returns {Map<string, { prefill: number, decode: number }>}
 */
function throughput() {
  const out = new Map();
  if (recent.length < 2) return out;
  const first = recent[0];
  const last = recent[recent.length - 1];
  const dt = Math.max(0.001, (last.at - first.at) / 1000);
  const before = new Map(first.regions.flatMap((r) => r.nodes.map((n) => [r.region + "/" + n.id, n.metrics])));
  for (const r of last.regions)
    for (const n of r.nodes) {
      const m = n.metrics;
      const b = before.get(r.region + "/" + n.id);
      if (!b) continue;
      const computed = (x) => x.measuredPromptTokens - x.measuredCachedTokens;
      out.set(r.region + "/" + n.id, {
        prefill: Math.max(0, computed(m) - computed(b)) / dt,
        decode: Math.max(0, m.completionTokens - b.completionTokens) / dt,
      });
    }
  return out;
}
/** @type {Map<string, { prefill: number, decode: number }>} */
let rates = new Map();

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
const fmt = (/** @type {number} */ n) =>
  n >= 1e9
    ? (n / 1e9).toFixed(2) + "G"
    : n >= 1e6
      ? (n / 1e6).toFixed(2) + "M"
      : n >= 1e4
        ? (n / 1e3).toFixed(1) + "k"
        : String(Math.round(n));
const pct = (/** @type {number | null} */ x) => (x === null || !isFinite(x) ? "–" : (100 * x).toFixed(1) + "%");
const esc = (/** @type {unknown} */ s) =>
  String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] ?? c);

function token() {
  return sessionStorage.getItem("warmpath-admin-token") ?? "";
}

async function poll() {
  const headers = token() ? { authorization: `Bearer ${token()}` } : undefined;
  try {
    const res = await fetch("/admin/state", { headers });
    if (res.status === 401) {
      $("login").hidden = false;
      $("app").hidden = true;
      $("status").textContent = "admin token needed";
      return;
    }
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const state = await res.json();
    $("login").hidden = true;
    $("app").hidden = false;
    render(state);
    $("status").textContent = "live · " + new Date(state.at).toLocaleTimeString();
    $("status").className = "status";
  } catch (e) {
    $("status").textContent = "cannot reach the router: " + /** @type {Error} */ (e).message;
    $("status").className = "status error";
  }
}

/** Sums per-node metrics over every region. */
function totals(state) {
  const t = { routed: 0, prompt: 0, predicted: 0, mPrompt: 0, mCached: 0, failed: 0, nodes: 0, up: 0 };
  for (const r of state.regions)
    for (const n of r.nodes) {
      const m = n.metrics;
      t.routed += m.routed;
      t.prompt += m.promptTokens;
      t.predicted += m.predictedCachedTokens;
      t.mPrompt += m.measuredPromptTokens;
      t.mCached += m.measuredCachedTokens;
      t.failed += m.failed + m.streamErrors;
      t.nodes++;
      if (n.available) t.up++;
    }
  return t;
}

function render(state) {
  const t = totals(state);
  // Rates over the last interval, from the difference with the previous snapshot.
  const sample = { t: state.at, measured: /** @type {number|null} */ (null), predicted: /** @type {number|null} */ (null), rps: {} };
  if (previous) {
    const p = totals(previous);
    const dt = Math.max(0.001, (state.at - previous.at) / 1000);
    sample.measured = t.mPrompt > p.mPrompt ? (t.mCached - p.mCached) / (t.mPrompt - p.mPrompt) : null;
    sample.predicted = t.prompt > p.prompt ? (t.predicted - p.predicted) / (t.prompt - p.prompt) : null;
    const before = new Map(previous.regions.flatMap((r) => r.nodes.map((n) => [r.region + "/" + n.id, n.metrics.routed])));
    for (const r of state.regions)
      for (const n of r.nodes)
        sample.rps[r.region + "/" + n.id] = (n.metrics.routed - (before.get(r.region + "/" + n.id) ?? n.metrics.routed)) / dt;
  }
  previous = state;
  recent.push(state);
  if (recent.length > THROUGHPUT_WINDOW) recent.shift();
  rates = throughput();
  history.push(sample);
  if (history.length > HISTORY) history.shift();

  $("cards").innerHTML = [
    ["Requests routed", fmt(t.routed)],
    ["Hit rate, measured", pct(t.mPrompt ? t.mCached / t.mPrompt : null)],
    ["Hit rate, predicted", pct(t.prompt ? t.predicted / t.prompt : null)],
    ["Prefill tokens saved", fmt(t.mCached)],
    ["Prefill tokens computed", fmt(Math.max(0, t.mPrompt - t.mCached))],
    ["Nodes available", `${t.up} / ${t.nodes}`],
    ["Failed before first byte", fmt(t.failed)],
  ]
    .map(([label, value]) => `<div class="card"><div class="label">${label}</div><div class="value">${value}</div></div>`)
    .join("");

  lineChart(
    $("chart-hit"),
    [
      { name: "measured", color: "#3fb950", values: history.map((h) => h.measured) },
      { name: "predicted", color: "#58a6ff", values: history.map((h) => h.predicted) },
    ],
    1,
    pct,
  );
  const keys = [...new Set(history.flatMap((h) => Object.keys(h.rps)))].sort();
  const maxRps = Math.max(1, ...history.flatMap((h) => Object.values(h.rps)));
  lineChart(
    $("chart-rps"),
    keys.map((k, i) => ({ name: k, color: PALETTE[i % PALETTE.length], values: history.map((h) => h.rps[k] ?? null) })),
    maxRps,
    (v) => v.toFixed(1),
  );
  $("legend-rps").innerHTML = keys.map((k, i) => `<span style="color:${PALETTE[i % PALETTE.length]}">● ${esc(k)}</span>`).join(" ");

  $("regions").innerHTML = state.regions.map(regionTable).join("");
}

/** One region: a row per node with its load, its decision mix and its hit rates. */
function regionTable(r) {
  const rows = r.nodes
    .map((n) => {
      const m = n.metrics;
      const rep = n.load.report;
      const mix = DECISIONS.map((d) =>
        m.decisions[d] ? `<span class="${d}" style="flex:${m.decisions[d]}" title="${d}: ${m.decisions[d]}"></span>` : "",
      ).join("");
      const kv = rep ? rep.kvUsage : 0;
      const tput = rates.get(r.region + "/" + n.id);
      return `<tr>
        <td><b>${esc(n.id)}</b></td>
        <td class="${n.available ? "up" : "down"}">${n.available ? "up" : n.cooldownMs ? "cooling down" : "silent"}</td>
        <td>${rep ? `${rep.running} / ${rep.waiting}` : "–"}</td>
        <td><span class="bar kv"><span style="width:${(100 * kv).toFixed(0)}%"></span></span> ${pct(kv)}</td>
        <td>${n.load.inflight}</td>
        <td>${fmt(n.load.workAheadTokens)}</td>
        <td>${fmt(m.routed)}</td>
        <td><span class="mix">${mix}</span></td>
        <td>${pct(m.promptTokens ? m.predictedCachedTokens / m.promptTokens : null)}</td>
        <td title="from ${fmt(m.measuredRequests)} answers that reported cached tokens">${pct(m.measuredPromptTokens ? m.measuredCachedTokens / m.measuredPromptTokens : null)} <small>(${fmt(m.measuredRequests)})</small></td>
        <td title="answers whose cached share the index predicted within one engine block, of ${fmt(m.compared)} compared; ${fmt(m.corrections)} corrections, ${fmt(m.silentRestarts)} silent restarts">${pct(m.compared ? m.agreed / m.compared : null)}</td>
        <td>${fmt(m.measuredCachedTokens)}</td>
        <td title="prefill tokens computed / tokens generated per second, over the last ~10 s (from the nodes' usage)">${tput ? `${fmt(tput.prefill)} / ${fmt(tput.decode)}` : "–"}</td>
      </tr>`;
    })
    .join("");
  return `<div class="region"><h2>${esc(r.region)}<small>policy ${esc(r.policy)} · ${r.nodes.length} nodes · index ${fmt(r.index.entries)} entries · ${r.inflight} in flight</small></h2>
    <table><thead><tr><th>node</th><th>state</th><th>running / waiting</th><th>KV usage</th><th>in flight</th><th>prefill queue (tokens)</th>
    <th>routed</th><th>decisions</th><th>hit predicted</th><th>hit measured (answers)</th><th>index agrees</th><th>prefill saved</th><th>tokens/s prefill / decode</th></tr></thead><tbody>${
      rows || '<tr><td colspan="13">no node has reported yet</td></tr>'
    }</tbody></table></div>`;
}

/**
 * Draws series (values over the history window) into an SVG with a 0..max axis.
 * @param {HTMLElement} svg
 * @param {{ name: string, color: string, values: (number|null)[] }[]} series
 * @param {number} max
 * @param {(v: number) => string} label
 */
function lineChart(svg, series, max, label) {
  const W = 600,
    H = 200,
    L = 44,
    R = 8,
    T = 8,
    B = 20;
  const x = (/** @type {number} */ i) => L + ((W - L - R) * i) / (HISTORY - 1);
  const y = (/** @type {number} */ v) => T + (H - T - B) * (1 - Math.min(v, max) / max);
  let out = "";
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4;
    out += `<line class="grid" x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}"/><text x="${L - 4}" y="${y(v) + 3}" text-anchor="end">${label(v)}</text>`;
  }
  out += `<text x="${L}" y="${H - 4}">−${HISTORY}s</text><text x="${W - R}" y="${H - 4}" text-anchor="end">now</text>`;
  for (const s of series) {
    const offset = HISTORY - s.values.length;
    let d = "";
    s.values.forEach((v, i) => {
      if (v === null) return;
      d += (d && s.values[i - 1] !== null ? "L" : "M") + x(offset + i).toFixed(1) + "," + y(v).toFixed(1);
    });
    if (d) out += `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"><title>${esc(s.name)}</title></path>`;
    // The latest value as a dot, so a series is visible from its first sample.
    for (let i = s.values.length - 1; i >= 0; i--) {
      const v = s.values[i];
      if (v === null || v === undefined) continue;
      out += `<circle cx="${x(offset + i).toFixed(1)}" cy="${y(v).toFixed(1)}" r="3.5" fill="${s.color}"><title>${esc(s.name)}: ${label(v)}</title></circle>`;
      break;
    }
  }
  svg.innerHTML = out;
}

$("login").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem("warmpath-admin-token", /** @type {HTMLInputElement} */ ($("token")).value);
  poll();
});

poll();
setInterval(poll, 1000);
