// warmpath dashboard. Two sources, both kept by the router (each region's Durable Object), so the
// page is useful the moment it opens:
// - GET /admin/history, every HISTORY_POLL_MS: the last hour in 10 s buckets (charts, per-node
//   token throughput) and the region's recent decisions with the candidates each one weighed;
// - GET /admin/state, every second: the live cards and the per-node table.
// Plain JS, no dependencies; charts are SVG built here, drawn at the size they are shown (so their
// labels are the stylesheet's 12px whatever the window), on a time axis that starts at the oldest
// data point (a minute on a fresh router, growing to the hour the router keeps).
// @ts-check

const DECISIONS = ["prefix-hit", "session", "pinned", "cold-spread", "hot-spill", "balance", "retry", "failover"];
/**
 * Node colours: the Okabe-Ito palette (distinguishable with every common colour-vision
 * deficiency), its black swapped for a light grey on the dark background. Past eight nodes the
 * colours come round again, dashed, then dotted.
 */
const NODE_COLOURS = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#DDDDDD"];
const NODE_DASHES = ["", "8 4", "2 4"];
/** The hit-rate chart's two series (Okabe-Ito orange and sky blue, the prediction dashed). */
const MEASURED_COLOUR = "#E69F00";
const PREDICTED_COLOUR = "#56B4E9";
/** History is refetched this often (ms): the buckets are 10 s wide. */
const HISTORY_POLL_MS = 5_000;
/** The usage ledger changes by the second but is read for totals: every 30 s is plenty. */
const USAGE_POLL_MS = 30_000;
/** The history the router keeps: the charts' longest time axis. */
const HISTORY_KEPT_MS = 3_600_000;
/** The charts' shortest time axis: a fresh router's first requests are shown over a minute. */
const MIN_AXIS_MS = 60_000;
/** Chart height in CSS pixels (the width is the chart's box). */
const CHART_HEIGHT = 220;
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
  const t = {
    routed: 0,
    prompt: 0,
    predicted: 0,
    mPrompt: 0,
    mCached: 0,
    measured: 0,
    failed: 0,
    nodes: 0,
    up: 0,
    within: 0,
    judged: 0,
    queued: 0,
  };
  for (const r of state.regions)
    for (const n of r.nodes) {
      const m = n.metrics;
      t.routed += m.routed;
      t.prompt += m.promptTokens;
      t.predicted += m.predictedCachedTokens;
      t.mPrompt += m.measuredPromptTokens;
      t.mCached += m.measuredCachedTokens;
      t.measured += m.measuredRequests;
      // Before the first byte only: a stream that broke after it is not counted here.
      t.failed += m.failed;
      t.nodes++;
      if (n.available) t.up++;
    }
  for (const r of state.regions) {
    if (!r.goodput) continue;
    for (const k of Object.values(r.goodput.classes)) {
      t.within += k.within;
      t.judged += k.within + k.late + k.shed.objective + k.shed.deadline + k.shed["queue-full"];
    }
    for (const d of r.queue?.depth ?? []) t.queued += d;
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
    [
      "Goodput, within objective",
      `${pct(t.judged ? t.within / t.judged : null)} <small>of ${fmt(t.judged)} · ${fmt(t.queued)} queued now</small>`,
    ],
  ]
    .map(([label, value]) => `<div class="card"><div class="label">${label}</div><div class="value">${value}</div></div>`)
    .join("");
  const rates = throughput(history);
  $("regions").innerHTML = state.regions.map((r) => regionTable(r, rates)).join("");
}

/**
 * The charts' time axis: from the oldest bucket of any region (the first data point) to now, at
 * least {@link MIN_AXIS_MS} and at most the hour kept. `slots` are the buckets from the oldest to
 * the current one, each with the seconds it covers (the current one only as far as now) and the
 * time its figures are drawn at (the middle of what it covers).
 */
function timeAxis(h) {
  const width = h.regions[0]?.bucketMs ?? 10_000;
  const to = h.at;
  const starts = h.regions.flatMap((r) => r.buckets.map((b) => b.start)).filter((s) => s <= to);
  const oldest = starts.length ? Math.max(Math.min(...starts), to - HISTORY_KEPT_MS) : to;
  const from = Math.min(oldest, to - MIN_AXIS_MS);
  const slots = [];
  if (starts.length) {
    for (let start = oldest - (oldest % width); start <= to; start += width) {
      const end = Math.min(to, start + width);
      slots.push({ start, seconds: Math.max(1, (end - start) / 1000), t: Math.max(from, (start + end) / 2) });
    }
  }
  return { from, to, slots };
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
    const kept = r.buckets.filter((b) => b.start + r.bucketMs > since);
    // Over the time the buckets counted cover: the first one kept may start before the window (a
    // whole 10 s bucket of a 60 s window: up to 1/6 too high when divided by the window alone).
    const span = Math.max(1, (h.at - Math.min(h.at, ...kept.map((b) => b.start))) / 1000);
    for (const b of kept) {
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

/** A node's colour and dash, kept for as long as the page is open: a node keeps its look as others come and go. */
const nodeStyles = new Map();

/**
 * The look of a node's series, stable per node id: its id's hash picks a colour, the next free
 * one if another node shown has it; dashes only once every colour is taken.
 * @param {string[]} keys every node shown, sorted (so a page opened on the same nodes draws them alike)
 */
function styleNodes(keys) {
  const taken = new Set(keys.filter((k) => nodeStyles.has(k)).map((k) => nodeStyles.get(k).slot));
  for (const k of keys) {
    if (nodeStyles.has(k)) continue;
    const want = hash(k) % NODE_COLOURS.length;
    let slot = want;
    search: for (let dash = 0; dash < NODE_DASHES.length; dash++)
      for (let i = 0; i < NODE_COLOURS.length; i++) {
        const s = dash * NODE_COLOURS.length + ((want + i) % NODE_COLOURS.length);
        if (!taken.has(s)) {
          slot = s;
          break search;
        }
      }
    taken.add(slot);
    nodeStyles.set(k, {
      slot,
      color: NODE_COLOURS[slot % NODE_COLOURS.length],
      dash: NODE_DASHES[Math.floor(slot / NODE_COLOURS.length)] ?? "",
    });
  }
}

/** FNV-1a of a string: a node id's preferred colour. */
function hash(/** @type {string} */ s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function renderHistory(h) {
  const axis = timeAxis(h);
  const byStart = bucketsByStart(h);
  const at = axis.slots.map((s) => ({ ...s, b: byStart.get(s.start) }));
  const times = at.map((s) => s.t);
  lineChart(
    $("chart-hit"),
    axis,
    times,
    [
      { name: "measured", color: MEASURED_COLOUR, values: at.map(({ b }) => (b && b.mPrompt ? b.mCached / b.mPrompt : null)) },
      {
        name: "predicted",
        color: PREDICTED_COLOUR,
        dash: "8 4",
        values: at.map(({ b }) => (b && b.prompt ? b.predicted / b.prompt : null)),
      },
    ],
    { max: 1, step: 0.25, decimals: 0 },
    (v) => Math.round(100 * v) + "%",
  );
  const keys = [...new Set([...byStart.values()].flatMap((b) => [...b.nodes.keys()]))].sort();
  styleNodes(keys);
  for (const [id, unit, f] of /** @type {Array<[string, string, (n: any) => number]>} */ ([
    ["rps", "req/s", (n) => n.routed],
    ["prefill", "tok/s", (n) => n.prefillTokens],
    ["decode", "tok/s", (n) => n.decodeTokens],
  ])) {
    // Buckets hold only intervals with something in them: a missing one is nothing routed, nothing answered.
    const series = keys.map((k) => ({
      name: k,
      ...nodeStyles.get(k),
      values: at.map(({ b, seconds }) => {
        const n = b?.nodes.get(k);
        return n ? f(n) / seconds : 0;
      }),
    }));
    const ticks = niceTicks(Math.max(0, ...series.flatMap((s) => s.values.map((v) => v ?? 0))));
    const label = (/** @type {number} */ v) => num(v, ticks.decimals) + " " + unit;
    lineChart($(`chart-${id}`), axis, times, series, ticks, label);
    $(`legend-${id}`).innerHTML = series
      .map((s) => {
        const last = s.values.at(-1);
        const now = last === undefined || last === null ? "–" : num(last, ticks.decimals + 1) + " " + unit;
        return `<span title="${esc(s.name)}: ${now} in the latest bucket">${swatch(s.color, s.dash)} ${esc(s.name)} <small>${now}</small></span>`;
      })
      .join("");
  }
  renderDecisions(h);
}

/** A legend's sample of a series' line. */
function swatch(/** @type {string} */ color, /** @type {string} */ dash) {
  return `<svg class="swatch" width="26" height="10" aria-hidden="true"><line x1="1" y1="5" x2="25" y2="5" stroke="${color}" stroke-width="3"${dash ? ` stroke-dasharray="${dash}"` : ""}/></svg>`;
}

/**
 * A decision's first byte, in two columns: a stream's first token (its time to first token) and a
 * non-streamed answer, whose first byte is the whole answer. A region older than the record's
 * `firstByteKind` does not say which: one cell spanning both.
 */
function firstByteCells(d) {
  if (d.firstByteMs === null || d.firstByteMs === undefined) return "<td>–</td><td>–</td>";
  if (d.firstByteKind === "stream") return `<td class="ttft">${ms(d.firstByteMs)}</td><td>–</td>`;
  if (d.firstByteKind === "whole") return `<td>–</td><td class="whole">${ms(d.firstByteMs)}</td>`;
  return `<td colspan="2" class="first-byte-unknown" title="this region does not say whether the first byte was a stream's first token or a whole answer">${ms(d.firstByteMs)} <small>first byte</small></td>`;
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
            `<span class="${c.node === d.node ? "chosen" : ""}" title="in flight ${c.inflight}, ${fmt(c.workAheadTokens)} prefill tokens queued${c.slotWaitMs ? `, waits ${ms(c.slotWaitMs)} for a place` : ""}, load report ${c.reportAgeMs === null ? "none" : ms(c.reportAgeMs) + " old"}">${esc(c.node)} ${c.matchBlocks} blk · ${ms(c.estimatedTtftMs)}</span>`,
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
        ${firstByteCells(d)}
        <td>${measured}</td>
      </tr>`;
    })
    .join("");
  $("decisions").innerHTML = `<table><thead><tr><th>time</th><th>request</th><th>tenant</th><th>region</th><th>node</th><th>decision</th>
    <th>prefix blocks</th><th>candidates (believed cached blocks · estimated first token)</th><th>end</th>
    <th title="streamed answers: from dispatch to the stream's first byte">first token<br /><small>streamed</small></th>
    <th title="answers not streamed arrive whole: from dispatch to the whole answer">whole answer<br /><small>not streamed</small></th>
    <th>cached tokens measured / prompt</th></tr></thead><tbody>${body || '<tr><td colspan="12">no request yet</td></tr>'}</tbody></table>`;
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
        ${inflightCell(n)}
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
    <table><thead><tr><th>node</th><th>state</th><th>running / waiting</th><th>KV usage</th><th title="requests in flight / the places the node runs at once (max_running_requests, when configured or reported)">in flight / places</th><th>prefill queue (tokens)</th>
    <th>routed</th><th>decisions</th><th>hit predicted</th><th>hit measured (answers)</th><th>index agrees</th><th>prefill saved</th><th>tokens/s prefill / decode</th></tr></thead><tbody>${
      rows || '<tr><td colspan="13">no node has reported yet</td></tr>'
    }</tbody></table>${admissionTable(r)}</div>`;
}

/**
 * A node's requests in flight, over its places when it said them (max_running_requests): past
 * them a request waits for one to end, which the router counts as work ahead (slotWaitMs).
 */
function inflightCell(n) {
  const places = n.maxRunning;
  if (places === undefined) return `<td title="places not said (max_running_requests)">${n.load.inflight}</td>`;
  const hold = n.load.decodeMsMean === undefined ? "not measured yet" : ms(n.load.decodeMsMean);
  const title = `${places} places (max_running_requests); a place held ${hold} after the first byte on average; wait for a place now ${ms(n.load.slotWaitMs)}`;
  return `<td class="${n.load.slotWaitMs > 0 ? "full" : ""}" title="${esc(title)}">${n.load.inflight} <small>/ ${places}</small>${
    n.load.slotWaitMs > 0 ? ` <small>+${ms(n.load.slotWaitMs)}</small>` : ""
  }</td>`;
}

const CLASSES = ["interactive", "standard", "batch"];

/**
 * The region's admission (docs/ADMISSION.md): per class, what waits in its queue now, the answers
 * whose first byte came within their objective or late, those shed and why, and the mean wait of
 * those it queued; goodput is within / (within + late + shed). Absent for a region older than admission.
 */
function admissionTable(r) {
  const g = r.goodput;
  if (!g) return "";
  const rows = CLASSES.map((c, i) => {
    const k = g.classes[c];
    const shed = k.shed.objective + k.shed.deadline + k.shed["queue-full"];
    const all = k.within + k.late + shed;
    return `<tr><td><b>${c}</b></td><td>${fmt(r.queue?.depth[i] ?? 0)}</td><td>${fmt(k.placed)}</td><td>${fmt(k.within)}</td><td>${fmt(k.late)}</td>
      <td title="at arrival ${fmt(k.shed.objective)} · deadline passed in the queue ${fmt(k.shed.deadline)} · queue full ${fmt(k.shed["queue-full"])}">${fmt(shed)}</td>
      <td class="goodput">${pct(all ? k.within / all : null)}</td><td>${k.queued ? ms(k.queuedMs / k.queued) : "–"}</td></tr>`;
  }).join("");
  return `<table class="admission"><thead><tr><th>class</th><th>queued now</th><th>placed</th><th>within objective</th><th>late</th><th>shed</th><th>goodput</th><th>mean wait queued</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/** A tick's number: at most `decimals` decimals (trailing zeros dropped), from 10,000 in k and from a million in M. */
function num(/** @type {number} */ v, /** @type {number} */ decimals) {
  if (v >= 1e6) return +(v / 1e6).toFixed(2) + "M";
  if (v >= 1e4) return +(v / 1e3).toFixed(1) + "k";
  return String(+v.toFixed(decimals));
}

/**
 * A readable value axis from 0 past `v`: about four steps of 1, 2, 2.5 or 5 x 10^k, and the
 * decimals its labels need.
 */
function niceTicks(/** @type {number} */ v) {
  if (!(v > 0)) return { max: 1, step: 0.25, decimals: 2 };
  const raw = v / 4;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * p).find((x) => x >= raw) ?? raw;
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9) + (step / p === 2.5 ? 1 : 0));
  return { max: Math.ceil(v / step - 1e-9) * step, step, decimals };
}

/** Time-axis steps: the first that leaves room for each tick's label. */
const TIME_STEPS_S = [10, 15, 30, 60, 120, 300, 600, 900, 1200, 1800];

/** A time tick's label: seconds or minutes before now. */
function ago(/** @type {number} */ seconds, /** @type {number} */ step) {
  if (seconds === 0) return "now";
  return step < 60 ? `−${seconds} s` : `−${seconds / 60} min`;
}

/** @type {CanvasRenderingContext2D | null} */
let measurer = null;
/** The width of a label in the charts' font (12px, as the stylesheet's .chart text). */
function textWidth(/** @type {string} */ s) {
  measurer ??= document.createElement("canvas").getContext("2d");
  if (!measurer) return s.length * 7;
  measurer.font = "12px system-ui, -apple-system, 'Segoe UI', sans-serif";
  return measurer.measureText(s).width;
}

/**
 * Draws series (one value per slot of the time axis, null where there is none) into an SVG at the
 * size it is shown, with a value axis from 0 and a time axis from the oldest data to now.
 * @param {HTMLElement} svg
 * @param {{ from: number, to: number }} axis
 * @param {number[]} times when each value is drawn (ms epoch)
 * @param {{ name: string, color: string, dash?: string, values: (number|null)[] }[]} series
 * @param {{ max: number, step: number, decimals?: number }} ticks
 * @param {(v: number) => string} label
 */
function lineChart(svg, axis, times, series, ticks, label) {
  const W = Math.max(240, Math.round(svg.getBoundingClientRect().width) || 600);
  const H = CHART_HEIGHT;
  const yLabels = [];
  for (let v = 0; v <= ticks.max + ticks.step / 2; v += ticks.step) yLabels.push({ v, text: label(v) });
  const L = Math.ceil(Math.max(...yLabels.map((t) => textWidth(t.text)))) + 12,
    R = 14,
    T = 10,
    B = 26;
  const span = Math.max(1, axis.to - axis.from);
  const x = (/** @type {number} */ t) => L + ((W - L - R) * (t - axis.from)) / span;
  const y = (/** @type {number} */ v) => T + (H - T - B) * (1 - Math.min(v, ticks.max) / ticks.max);
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.dataset.from = String(axis.from);
  svg.dataset.to = String(axis.to);
  svg.dataset.spanMs = String(span);
  let out = "";
  for (const { v, text } of yLabels) {
    out += `<line class="grid" x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}"/><text class="y-tick" x="${L - 6}" y="${y(v) + 4}" text-anchor="end">${esc(text)}</text>`;
  }
  // Time ticks back from now, every step that leaves ~70 px for a label.
  const seconds = span / 1000;
  const room = Math.max(2, Math.floor((W - L - R) / 70));
  // Seconds up to two minutes, minutes past them.
  const step = TIME_STEPS_S.find((s) => seconds / s <= room && (s >= 60 || seconds <= 120)) ?? 3600;
  for (let k = 0; k * step <= seconds + 1e-6; k++) {
    const px = x(axis.to - k * step * 1000);
    const anchor = k === 0 ? "end" : px - L < 24 ? "start" : "middle";
    out += `<line class="grid tick" x1="${px}" x2="${px}" y1="${H - B}" y2="${H - B + 4}"/>`;
    out += `<text class="x-tick" x="${k === 0 ? W - R : px}" y="${H - 8}" text-anchor="${anchor}">${ago(k * step, step)}</text>`;
  }
  out += `<line class="axis" x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}"/>`;
  if (!series.some((s) => s.values.some((v) => v !== null))) {
    out += `<text class="empty" x="${(L + W - R) / 2}" y="${(T + H - B) / 2}" text-anchor="middle">no data yet</text>`;
  }
  for (const s of series) {
    let d = "";
    s.values.forEach((v, i) => {
      if (v === null) return;
      const lone = (i === 0 || s.values[i - 1] === null) && (i === s.values.length - 1 || s.values[i + 1] === null);
      d += (d && s.values[i - 1] !== null ? "L" : "M") + x(times[i] ?? axis.to).toFixed(1) + "," + y(v).toFixed(1);
      // A value between gaps is a point: drawn as one.
      if (lone && i < s.values.length - 1) {
        out += `<circle class="point" cx="${x(times[i] ?? axis.to).toFixed(1)}" cy="${y(v).toFixed(1)}" r="2.5" fill="${s.color}"/>`;
      }
    });
    const dash = s.dash ? ` stroke-dasharray="${s.dash}"` : "";
    if (d)
      out += `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2.5"${dash} stroke-linejoin="round"><title>${esc(s.name)}</title></path>`;
    // The latest value as a dot, so a series is visible from its first bucket.
    for (let i = s.values.length - 1; i >= 0; i--) {
      const v = s.values[i];
      if (v === null || v === undefined) continue;
      out += `<circle class="latest" cx="${x(times[i] ?? axis.to).toFixed(1)}" cy="${y(v).toFixed(1)}" r="4" fill="${s.color}"><title>${esc(s.name)}: ${esc(label(v))}</title></circle>`;
      break;
    }
  }
  svg.innerHTML = out;
}

/**
 * This month's usage per tenant, summed over regions, models and days: requests, tokens (the
 * nodes' own, and estimated apart), cached share and cost, most expensive first.
 */
async function pollUsage() {
  try {
    const u = await get("/admin/usage");
    if (!u) return;
    /** @type {Map<string, any>} */
    const byTenant = new Map();
    for (const r of u.data) {
      const t = byTenant.get(r.tenant) ?? {
        tenant: r.tenant,
        requests: 0,
        prompt: 0,
        cached: 0,
        completion: 0,
        estimated: 0,
        cost: 0,
        models: new Set(),
      };
      t.requests += r.requests;
      t.prompt += r.prompt_tokens;
      t.cached += r.cached_tokens;
      t.completion += r.completion_tokens;
      t.estimated += r.estimated_prompt_tokens + r.estimated_completion_tokens;
      t.cost += r.cost_usd + r.estimated_cost_usd;
      t.models.add(r.model);
      byTenant.set(r.tenant, t);
    }
    const rows = [...byTenant.values()]
      .sort((a, b) => b.cost - a.cost || b.prompt + b.completion - (a.prompt + a.completion))
      .map(
        (
          t,
        ) => `<tr><td>${esc(t.tenant)}</td><td>${fmt(t.requests)}</td><td>${fmt(t.prompt)}</td><td>${pct(t.prompt ? t.cached / t.prompt : null)}</td>
          <td>${fmt(t.completion)}</td><td>${t.estimated ? fmt(t.estimated) : "–"}</td><td>$${t.cost.toFixed(4)}</td><td>${esc([...t.models].join(", "))}</td></tr>`,
      )
      .join("");
    $("usage").innerHTML =
      `<table><thead><tr><th>tenant</th><th>requests</th><th>prompt tokens</th><th>cached</th><th>completion tokens</th>
      <th title="tokens estimated for answers whose node reported no usage">estimated tokens</th><th>cost (USD)</th><th>models</th></tr></thead>
      <tbody>${rows || `<tr><td colspan="8">no usage since ${esc(u.from)}</td></tr>`}</tbody></table>`;
  } catch {
    // pollState reports an unreachable router.
  }
}

/** Charts are drawn at their size: drawn again when the window changes it. */
let redraw = 0;
window.addEventListener("resize", () => {
  cancelAnimationFrame(redraw);
  redraw = requestAnimationFrame(() => history && renderHistory(history));
});

$("login").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem("warmpath-admin-token", /** @type {HTMLInputElement} */ ($("token")).value);
  pollHistory().then(pollState).then(pollUsage);
});

pollHistory().then(pollState).then(pollUsage);
setInterval(pollState, 1000);
setInterval(pollHistory, HISTORY_POLL_MS);
setInterval(pollUsage, USAGE_POLL_MS);
