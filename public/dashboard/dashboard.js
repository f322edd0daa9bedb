// warmpath dashboard. Two sources, both kept by the router (each region's Durable Object), so the
// page is useful the moment it opens:
// - GET /admin/history, every HISTORY_POLL_MS: the last hour in 10 s buckets (charts, per-node
//   token throughput) and the region's recent decisions with the candidates each one weighed;
// - GET /admin/state, every second: the live cards and the per-node table.
// Plain JS, no dependencies; charts are SVG built here.
// @ts-check

const DECISIONS = ["prefix-hit", "session", "pinned", "cold-spread", "hot-spill", "balance", "retry", "failover"];
const PALETTE = ["#58a6ff", "#3fb950", "#f0883e", "#a371f7", "#d29922", "#f85149", "#39c5cf", "#db61a2", "#8b98a5"];
/** History is refetched this often (ms): the buckets are 10 s wide. */
const HISTORY_POLL_MS = 5_000;
/** Per-node token throughput in the table: averaged over the last 60 s of history. */
const THROUGHPUT_WINDOW_MS = 60_000;
/** Recent decisions shown (newest first, every region). */
const DECISION_ROWS = 25;
/** Candidates listed per decision (the region keeps up to 8, the chosen one always among them). */
const CANDIDATES_SHOWN = 3;

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
const fmt = (/** @type {number} */ n) =>
  n >= 1e9
    ? (n / 1e9).toFixed(2) + "G"
    : n >= 1e6
      ? (n / 1e6).toFixed(2) + "M"
      : n >= 1e4
        ? (n / 1e3).toFixed(1) + "k"
        : n >= 100 || Number.isInteger(n)
          ? String(Math.round(n))
          : n.toFixed(1);
const pct = (/** @type {number | null} */ x) => (x === null || !isFinite(x) ? "–" : (100 * x).toFixed(1) + "%");
const ms = (/** @type {number | null} */ x) => (x === null ? "–" : x >= 10_000 ? (x / 1000).toFixed(1) + " s" : Math.round(x) + " ms");
const esc = (/** @type {unknown} */ s) =>
  String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] ?? c);

function token() {
  return sessionStorage.getItem("warmpath-admin-token") ?? "";
}

/** GETs an admin path; null when the token is missing or wrong (the login form is shown). */
async function get(/** @type {string} */ path) {
  const headers = token() ? { authorization: `Bearer ${token()}` } : undefined;
  const res = await fetch(path, { headers });
  if (res.status === 401) {
    $("login").hidden = false;
    $("app").hidden = true;
    $("status").textContent = "admin token needed";
    return null;
  }
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  $("login").hidden = true;
  $("app").hidden = false;
  return res.json();
}

/** @type {any} */
let history = null;

async function pollState() {
  try {
    const state = await get("/admin/state");
    if (!state) return;
    renderState(state);
    $("status").textContent = "live · " + new Date(state.at).toLocaleTimeString();
    $("status").className = "status";
  } catch (e) {
    $("status").textContent = "cannot reach the router: " + /** @type {Error} */ (e).message;
    $("status").className = "status error";
  }
}

async function pollHistory() {
  try {
    const h = await get("/admin/history");
    if (!h) return;
    history = h;
    renderHistory(h);
  } catch {
    // pollState reports an unreachable router.
  }
}

/** Sums per-node metrics over every region. */
function totals(state) {
  const t = { routed: 0, prompt: 0, predicted: 0, mPrompt: 0, mCached: 0, measured: 0, failed: 0, nodes: 0, up: 0 };
  for (const r of state.regions)
    for (const n of r.nodes) {
      const m = n.metrics;
      t.routed += m.routed;
      t.prompt += m.promptTokens;
      t.predicted += m.predictedCachedTokens;
      t.mPrompt += m.measuredPromptTokens;
      t.mCached += m.measuredCachedTokens;
      t.measured += m.measuredRequests;
      t.failed += m.failed + m.streamErrors;
      t.nodes++;
      if (n.available) t.up++;
    }
  return t;
}

function renderState(state) {
  const t = totals(state);
  $("cards").innerHTML = [
    ["Requests routed", fmt(t.routed)],
    ["Hit rate, measured", `${pct(t.mPrompt ? t.mCached / t.mPrompt : null)} <small>of ${fmt(t.measured)} answers</small>`],
    ["Hit rate, predicted", pct(t.prompt ? t.predicted / t.prompt : null)],
    ["Prefill tokens saved", fmt(t.mCached)],
    ["Prefill tokens computed", fmt(Math.max(0, t.mPrompt - t.mCached))],
    ["Nodes available", `${t.up} / ${t.nodes}`],
    ["Failed before first byte", fmt(t.failed)],
  ]
    .map(([label, value]) => `<div class="card"><div class="label">${label}</div><div class="value">${value}</div></div>`)
    .join("");
  const rates = throughput(history);
  $("regions").innerHTML = state.regions.map((r) => regionTable(r, rates)).join("");
}

/**
 * The history's time axis: one slot per bucket of the last hour, oldest first, each with the
 * seconds it covers (the current bucket only as far as now).
 */
function slots(h) {
  const width = h.regions[0]?.bucketMs ?? 10_000;
  const count = 3_600_000 / width;
  const last = h.at - (h.at % width);
  return Array.from({ length: count }, (_, i) => {
    const start = last - (count - 1 - i) * width;
    return { start, seconds: Math.max(1, (Math.min(h.at, start + width) - start) / 1000) };
  });
}

/** Every region's buckets by start time, each bucket's figures summed over regions. */
function bucketsByStart(h) {
  /** @type {Map<number, { routed: number, prompt: number, predicted: number, mPrompt: number, mCached: number, nodes: Map<string, any> }>} */
  const out = new Map();
  for (const r of h.regions)
    for (const b of r.buckets) {
      let s = out.get(b.start);
      if (!s) out.set(b.start, (s = { routed: 0, prompt: 0, predicted: 0, mPrompt: 0, mCached: 0, nodes: new Map() }));
      s.routed += b.routed;
      s.prompt += b.promptTokens;
      s.predicted += b.predictedCachedTokens;
      s.mPrompt += b.measuredPromptTokens;
      s.mCached += b.measuredCachedTokens;
      for (const [id, n] of Object.entries(b.nodes)) s.nodes.set(r.region + "/" + id, n);
    }
  return out;
}

/** Per node: prefill tokens computed and tokens generated per second over the last minute of history. */
function throughput(h) {
  /** @type {Map<string, { prefill: number, decode: number }>} */
  const out = new Map();
  if (!h) return out;
  const since = h.at - THROUGHPUT_WINDOW_MS;
  for (const r of h.regions) {
    const span = Math.max(1, Math.min(THROUGHPUT_WINDOW_MS, h.at - (r.buckets[0]?.start ?? h.at)) / 1000);
    for (const b of r.buckets) {
      if (b.start + r.bucketMs <= since) continue;
      for (const [id, n] of Object.entries(b.nodes)) {
        const key = r.region + "/" + id;
        const t = out.get(key) ?? { prefill: 0, decode: 0 };
        t.prefill += n.prefillTokens / span;
        t.decode += n.decodeTokens / span;
        out.set(key, t);
      }
    }
  }
  return out;
}

function renderHistory(h) {
  const axis = slots(h);
  const byStart = bucketsByStart(h);
  const at = axis.map((s) => ({ ...s, b: byStart.get(s.start) }));
  lineChart(
    $("chart-hit"),
    [
      { name: "measured", color: "#3fb950", values: at.map(({ b }) => (b && b.mPrompt ? b.mCached / b.mPrompt : null)) },
      { name: "predicted", color: "#58a6ff", values: at.map(({ b }) => (b && b.prompt ? b.predicted / b.prompt : null)) },
    ],
    1,
    pct,
  );
  const keys = [...new Set([...byStart.values()].flatMap((b) => [...b.nodes.keys()]))].sort();
  const perNode = (/** @type {(n: any) => number} */ f) =>
    keys.map((k, i) => ({
      name: k,
      color: PALETTE[i % PALETTE.length],
      values: at.map(({ b, seconds }) => {
        const n = b?.nodes.get(k);
        return n ? f(n) / seconds : b ? 0 : null;
      }),
    }));
  const legend = keys.map((k, i) => `<span style="color:${PALETTE[i % PALETTE.length]}">● ${esc(k)}</span>`).join(" ");
  for (const [id, f] of /** @type {Array<[string, (n: any) => number]>} */ ([
    ["rps", (n) => n.routed],
    ["prefill", (n) => n.prefillTokens],
    ["decode", (n) => n.decodeTokens],
  ])) {
    const series = perNode(f);
    const max = Math.max(1, ...series.flatMap((s) => s.values.filter((v) => v !== null)));
    lineChart($(`chart-${id}`), series, niceCeil(max), fmt);
    $(`legend-${id}`).innerHTML = legend;
  }
  renderDecisions(h);
}

/** The recent decisions of every region, newest first: why each request went where it did. */
function renderDecisions(h) {
  const rows = h.regions
    .flatMap((r) => r.decisions.map((d) => ({ ...d, region: r.region })))
    .sort((a, b) => b.at - a.at)
    .slice(0, DECISION_ROWS);
  const body = rows
    .map((d) => {
      const candidates = d.considered
        .slice(0, CANDIDATES_SHOWN)
        .map(
          (c) =>
            `<span class="${c.node === d.node ? "chosen" : ""}" title="in flight ${c.inflight}, ${fmt(c.workAheadTokens)} prefill tokens queued, load report ${c.reportAgeMs === null ? "none" : ms(c.reportAgeMs) + " old"}">${esc(c.node)} ${c.matchBlocks} blk · ${ms(c.estimatedTtftMs)}</span>`,
        )
        .join("");
      const more = d.considered.length > CANDIDATES_SHOWN ? ` <small>+${d.considered.length - CANDIDATES_SHOWN}</small>` : "";
      const measured =
        d.measuredCachedTokens === null
          ? "–"
          : `${fmt(d.measuredCachedTokens)} / ${fmt(d.measuredPromptTokens)} <small>(predicted ${fmt(d.predictedCachedTokens)})</small>`;
      return `<tr>
        <td>${new Date(d.at).toLocaleTimeString()}</td>
        <td title="${esc(d.requestId)}"><code>${esc(d.requestId.slice(0, 8))}</code></td>
        <td>${esc(d.tenant ?? "–")}</td>
        <td>${esc(d.region)}</td>
        <td>${esc(d.node ?? "–")}</td>
        <td><span class="d ${esc(d.decision)}">${esc(d.decision)}</span></td>
        <td>${d.matchBlocks} / ${d.totalBlocks}</td>
        <td class="candidates">${candidates}${more}</td>
        <td class="${d.status === "ok" ? "up" : d.status === "in-flight" ? "" : "down"}">${esc(d.status)}</td>
        <td>${ms(d.firstByteMs)}</td>
        <td>${measured}</td>
      </tr>`;
    })
    .join("");
  $("decisions").innerHTML = `<table><thead><tr><th>time</th><th>request</th><th>tenant</th><th>region</th><th>node</th><th>decision</th>
    <th>prefix blocks</th><th>candidates (believed cached blocks · estimated first token)</th><th>end</th><th>first byte</th>
    <th>cached tokens measured / prompt</th></tr></thead><tbody>${body || '<tr><td colspan="11">no request yet</td></tr>'}</tbody></table>`;
}

/** One region: a row per node with its load, its decision mix and its hit rates. */
function regionTable(r, rates) {
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
        <td class="${n.available ? "up" : "down"}" title="circuit breaker ${esc(n.breaker)}; ${n.consecutiveFailures} failures in a row">${
          n.breaker === "open"
            ? `breaker open ${ms(n.cooldownMs)}`
            : n.breaker === "half-open"
              ? n.available
                ? "trial"
                : "trial running"
              : n.available
                ? "up"
                : "silent"
        }</td>
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
        <td title="prefill tokens computed / tokens generated per second, over the last minute (from the nodes' usage)">${tput ? `${fmt(tput.prefill)} / ${fmt(tput.decode)}` : "–"}</td>
      </tr>`;
    })
    .join("");
  return `<div class="region"><h2>${esc(r.region)}<small>policy ${esc(r.policy)} · ${r.nodes.length} nodes · index ${fmt(r.index.entries)} entries · ${r.inflight} in flight</small></h2>
    <table><thead><tr><th>node</th><th>state</th><th>running / waiting</th><th>KV usage</th><th>in flight</th><th>prefill queue (tokens)</th>
    <th>routed</th><th>decisions</th><th>hit predicted</th><th>hit measured (answers)</th><th>index agrees</th><th>prefill saved</th><th>tokens/s prefill / decode</th></tr></thead><tbody>${
      rows || '<tr><td colspan="13">no node has reported yet</td></tr>'
    }</tbody></table></div>`;
}

/** The next of 1, 2, 5 x 10^k at or above v: a readable axis maximum. */
function niceCeil(/** @type {number} */ v) {
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * p).find((x) => x >= v) ?? v;
}

/**
 * Draws series (one value per history slot, null where there is none) into an SVG with a 0..max axis.
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
  const n = Math.max(2, series[0]?.values.length ?? 2);
  const x = (/** @type {number} */ i) => L + ((W - L - R) * i) / (n - 1);
  const y = (/** @type {number} */ v) => T + (H - T - B) * (1 - Math.min(v, max) / max);
  let out = "";
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4;
    out += `<line class="grid" x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}"/><text x="${L - 4}" y="${y(v) + 3}" text-anchor="end">${label(v)}</text>`;
  }
  out += `<text x="${L}" y="${H - 4}">−60 min</text><text x="${(L + W - R) / 2}" y="${H - 4}" text-anchor="middle">−30 min</text><text x="${W - R}" y="${H - 4}" text-anchor="end">now</text>`;
  for (const s of series) {
    let d = "";
    s.values.forEach((v, i) => {
      if (v === null) return;
      d += (d && s.values[i - 1] !== null ? "L" : "M") + x(i).toFixed(1) + "," + y(v).toFixed(1);
    });
    if (d) out += `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"><title>${esc(s.name)}</title></path>`;
    // The latest value as a dot, so a series is visible from its first bucket.
    for (let i = s.values.length - 1; i >= 0; i--) {
      const v = s.values[i];
      if (v === null || v === undefined) continue;
      out += `<circle cx="${x(i).toFixed(1)}" cy="${y(v).toFixed(1)}" r="3.5" fill="${s.color}"><title>${esc(s.name)}: ${label(v)}</title></circle>`;
      break;
    }
  }
  svg.innerHTML = out;
}

$("login").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem("warmpath-admin-token", /** @type {HTMLInputElement} */ ($("token")).value);
  pollHistory().then(pollState);
});

pollHistory().then(pollState);
setInterval(pollState, 1000);
setInterval(pollHistory, HISTORY_POLL_MS);
