/** Hand-written SVG charts (no dependencies): a line chart over load levels and a bar chart. */

const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000"];
const W = 720;
const H = 400;
const M = { left: 70, right: 190, top: 36, bottom: 50 };

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function fmt(v: number): string {
  if (v >= 100) return v.toFixed(0);
  if (v >= 10) return v.toFixed(1).replace(/\.0$/, "");
  if (v >= 1) return v.toFixed(2).replace(/\.?0+$/, "");
  return v.toPrecision(2);
}

export interface Series {
  name: string;
  points: Array<[number, number]>;
  dashed?: boolean;
}

/**
 * A linear y axis instead of the default log one: from `min` to `max`, gridlines at `ticks`,
 * labelled by `label` (goodput, a share from 0 to 1).
 */
export interface LinearAxis {
  min: number;
  max: number;
  ticks: number[];
  label: (v: number) => string;
}

/** Line chart; y on a log scale (TTFT spans orders of magnitude across load levels), or linear with `linear`. */
export function lineChart(title: string, xLabel: string, yLabel: string, series: Series[], linear?: LinearAxis): string {
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = series.flatMap((s) => s.points.map((p) => p[1])).filter((y) => y > 0 && Number.isFinite(y));
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  const lo = linear ? 0 : Math.floor(Math.log10(Math.min(...ys)));
  const hi = linear ? 0 : Math.ceil(Math.log10(Math.max(...ys)));
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  const sx = (x: number) => M.left + (x1 === x0 ? pw / 2 : ((x - x0) / (x1 - x0)) * pw);
  const sy = linear
    ? (y: number) => M.top + ph - ((Math.min(linear.max, Math.max(linear.min, y)) - linear.min) / (linear.max - linear.min)) * ph
    : (y: number) => M.top + ph - ((Math.log10(Math.max(y, 10 ** lo)) - lo) / Math.max(1, hi - lo)) * ph;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
  );
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${W / 2 - M.right / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">${esc(title)}</text>`);
  if (linear) {
    for (const v of linear.ticks) {
      const y = sy(v);
      out.push(`<line x1="${M.left}" x2="${M.left + pw}" y1="${y}" y2="${y}" stroke="#ddd"/>`);
      out.push(`<text x="${M.left - 6}" y="${y + 4}" text-anchor="end">${esc(linear.label(v))}</text>`);
    }
  }
  for (let e = lo; !linear && e <= hi; e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v > 10 ** hi) break;
      const y = sy(v);
      out.push(`<line x1="${M.left}" x2="${M.left + pw}" y1="${y}" y2="${y}" stroke="${m === 1 ? "#ccc" : "#eee"}"/>`);
      out.push(`<text x="${M.left - 6}" y="${y + 4}" text-anchor="end">${fmt(v)}</text>`);
    }
  }
  for (const x of [...new Set(xs)].sort((a, b) => a - b)) {
    out.push(`<line x1="${sx(x)}" x2="${sx(x)}" y1="${M.top}" y2="${M.top + ph}" stroke="#eee"/>`);
    out.push(`<text x="${sx(x)}" y="${M.top + ph + 16}" text-anchor="middle">x${x}</text>`);
  }
  out.push(`<rect x="${M.left}" y="${M.top}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`);
  out.push(`<text x="${M.left + pw / 2}" y="${H - 12}" text-anchor="middle">${esc(xLabel)}</text>`);
  out.push(`<text transform="translate(16 ${M.top + ph / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`);
  series.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length]!;
    const d = s.points.map((p, k) => `${k === 0 ? "M" : "L"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" ");
    const dash = s.dashed ? ` stroke-dasharray="5,4"` : "";
    const width = s.name === "warmpath" ? 3 : 1.5;
    out.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="${width}"${dash}/>`);
    for (const p of s.points) out.push(`<circle cx="${sx(p[0]).toFixed(1)}" cy="${sy(p[1]).toFixed(1)}" r="2.5" fill="${color}"/>`);
    const ly = M.top + 8 + i * 18;
    out.push(
      `<line x1="${W - M.right + 12}" x2="${W - M.right + 36}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="${width}"${dash}/>`,
    );
    out.push(`<text x="${W - M.right + 42}" y="${ly + 4}">${esc(s.name)}</text>`);
  });
  out.push("</svg>");
  return out.join("\n") + "\n";
}

/** Horizontal bar chart of values in [0, 1] (hit rates), with an optional reference line. */
export function barChart(title: string, bars: Array<{ name: string; value: number }>, reference?: { name: string; value: number }): string {
  const rowH = 24;
  const left = 150;
  const width = 520;
  const h = 50 + bars.length * rowH + 30;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${left + width + 60}" height="${h}" viewBox="0 0 ${left + width + 60} ${h}" font-family="sans-serif" font-size="12">`,
  );
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(`<text x="${(left + width) / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">${esc(title)}</text>`);
  const max = Math.max(0.01, ...bars.map((b) => b.value), reference?.value ?? 0);
  const scale = width / Math.min(1, max * 1.1);
  bars.forEach((b, i) => {
    const y = 36 + i * rowH;
    const color = b.name === "warmpath" ? "#d62728" : b.name === "oracle" || b.name === "pooled" ? "#7f7f7f" : "#1f77b4";
    out.push(`<text x="${left - 8}" y="${y + 15}" text-anchor="end">${esc(b.name)}</text>`);
    out.push(`<rect x="${left}" y="${y + 3}" width="${(b.value * scale).toFixed(1)}" height="${rowH - 8}" fill="${color}"/>`);
    out.push(`<text x="${left + b.value * scale + 4}" y="${y + 15}">${(b.value * 100).toFixed(1)}%</text>`);
  });
  if (reference) {
    const x = left + reference.value * scale;
    const y1 = 34;
    const y2 = 36 + bars.length * rowH;
    out.push(`<line x1="${x}" x2="${x}" y1="${y1}" y2="${y2}" stroke="#000" stroke-dasharray="4,3"/>`);
    out.push(`<text x="${x}" y="${y2 + 16}" text-anchor="middle">${esc(reference.name)}</text>`);
  }
  out.push("</svg>");
  return out.join("\n") + "\n";
}
