/**
 * A small parser of Prometheus' text exposition format (0.0.4, and the sample lines of
 * OpenMetrics): what the agent needs from an engine's `/metrics`, no more.
 *
 *   # HELP name doc          comments (HELP, TYPE, EOF, anything after `#`) are skipped
 *   name{label="v",...} value [timestamp]
 *
 * Metric names may hold colons (`vllm:num_requests_running`). Label values unescape `\\`, `\"`
 * and `\n`. Values are Go-style floats: `3`, `3.0`, `1.23457e+06` (llama.cpp prints C++ stream
 * defaults), `+Inf`, `-Inf`, `NaN`. A malformed line is skipped, not fatal: one odd line from an
 * engine must not hide the load on every other line.
 */

export interface Sample {
  name: string;
  labels: Readonly<Record<string, string>>;
  value: number;
}

const NAME = /[a-zA-Z_:][a-zA-Z0-9_:]*/y;
const LABEL_NAME = /[a-zA-Z_][a-zA-Z0-9_]*/y;
const FLOAT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/** Every sample of the page, in order. */
export function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split("\n")) {
    const sample = parseLine(raw);
    if (sample) out.push(sample);
  }
  return out;
}

/** A Go-style float as Prometheus writes it, or undefined. */
export function parseValue(token: string): number | undefined {
  switch (token) {
    case "+Inf":
    case "Inf":
      return Infinity;
    case "-Inf":
      return -Infinity;
    case "NaN":
      return NaN;
  }
  return FLOAT.test(token) ? Number(token) : undefined;
}

function parseLine(raw: string): Sample | undefined {
  const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
  let i = skipSpaces(line, 0);
  if (i >= line.length || line[i] === "#") return undefined;
  NAME.lastIndex = i;
  const name = NAME.exec(line)?.[0];
  if (!name) return undefined;
  i += name.length;
  const labels: Record<string, string> = {};
  const brace = skipSpaces(line, i);
  if (line[brace] === "{") {
    i = parseLabels(line, brace + 1, labels);
    if (i < 0) return undefined;
  }
  if (i < line.length && line[i] !== " " && line[i] !== "\t") return undefined; // e.g. `name!{...}`
  const rest = line
    .slice(i)
    .trim()
    .split(/[ \t]+/);
  const value = parseValue(rest[0] ?? "");
  if (value === undefined || rest.length > 2) return undefined;
  return { name, labels, value };
}

/** Parses `a="x",b="y"}` from `i` into `labels`; the index after `}`, or -1 if malformed. */
function parseLabels(line: string, start: number, labels: Record<string, string>): number {
  let i = start;
  for (;;) {
    i = skipSpaces(line, i);
    if (line[i] === "}") return i + 1;
    LABEL_NAME.lastIndex = i;
    const key = LABEL_NAME.exec(line)?.[0];
    if (!key) return -1;
    i = skipSpaces(line, i + key.length);
    if (line[i] !== "=") return -1;
    i = skipSpaces(line, i + 1);
    if (line[i] !== '"') return -1;
    i++;
    let value = "";
    for (;;) {
      const c = line[i];
      if (c === undefined) return -1; // unterminated
      if (c === '"') break;
      if (c === "\\") {
        const next = line[i + 1];
        if (next === undefined) return -1;
        value += next === "n" ? "\n" : next; // `\\` -> `\`, `\"` -> `"`; others kept as written
        i += 2;
      } else {
        value += c;
        i++;
      }
    }
    labels[key] = value;
    i = skipSpaces(line, i + 1);
    if (line[i] === ",") {
      i++;
      continue; // a trailing comma before `}` is allowed
    }
    if (line[i] === "}") return i + 1;
    return -1;
  }
}

function skipSpaces(line: string, i: number): number {
  while (line[i] === " " || line[i] === "\t") i++;
  return i;
}

/** The samples of one metric name. */
export function series(samples: readonly Sample[], name: string): Sample[] {
  return samples.filter((s) => s.name === name);
}

/** The first of `names` that has samples: a renamed metric and its old name, newest first. */
export function firstSeries(samples: readonly Sample[], names: readonly string[]): Sample[] {
  for (const name of names) {
    const found = series(samples, name);
    if (found.length > 0) return found;
  }
  return [];
}

/**
 * Sums a gauge over the engine's data-parallel replicas. Samples are grouped by `groupLabel`
 * (vLLM's `engine`, SGLang's `dp_rank`): ranks of one replica (tensor or pipeline parallel,
 * or SGLang's `enable_metrics_for_all_schedulers`) export the same requests, so a group counts
 * once (its maximum), and distinct replicas add up. Non-finite values are ignored; undefined
 * when no finite sample is left.
 */
export function sumOverReplicas(samples: readonly Sample[], groupLabel: string): number | undefined {
  const groups = new Map<string, number>();
  for (const s of samples) {
    if (!Number.isFinite(s.value)) continue;
    const key = s.labels[groupLabel] ?? "";
    groups.set(key, Math.max(groups.get(key) ?? -Infinity, s.value));
  }
  if (groups.size === 0) return undefined;
  let total = 0;
  for (const v of groups.values()) total += v;
  return total;
}

/** The mean of the finite samples (a ratio over replicas of the same size), or undefined. */
export function meanValue(samples: readonly Sample[]): number | undefined {
  const finite = samples.filter((s) => Number.isFinite(s.value));
  if (finite.length === 0) return undefined;
  return finite.reduce((a, s) => a + s.value, 0) / finite.length;
}

/** The sum of the finite samples (a counter over all its label sets), or undefined. */
export function sumValues(samples: readonly Sample[]): number | undefined {
  const finite = samples.filter((s) => Number.isFinite(s.value));
  if (finite.length === 0) return undefined;
  return finite.reduce((a, s) => a + s.value, 0);
}
