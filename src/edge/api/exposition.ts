/**
 * Prometheus' text exposition format (version 0.0.4): metric families, each with its help and
 * type written once before its samples, label values escaped as the format requires. The metrics
 * themselves are prometheus.ts's.
 */

/** A sample's labels, by name. */
export type Labels = Record<string, string>;
type Kind = "counter" | "gauge" | "histogram";

/** Accumulates metric families; each family's help and type are written once, before its samples. */
export class Exposition {
  private readonly families = new Map<string, { help: string; kind: Kind; lines: string[] }>();

  add(name: string, kind: Kind, help: string, labels: Labels, value: number): void {
    this.family(name, kind, help).lines.push(`${name}${labelText(labels)} ${formatValue(value)}`);
  }

  /** A histogram from per-bucket counts (the last bucket unbounded), their sum, in `scale` units per bucket bound. */
  histogram(
    name: string,
    help: string,
    labels: Labels,
    bounds: readonly number[],
    counts: readonly number[],
    sum: number,
    scale = 1,
  ): void {
    const f = this.family(name, "histogram", help);
    let cumulative = 0;
    bounds.forEach((bound, i) => {
      cumulative += counts[i] ?? 0;
      f.lines.push(`${name}_bucket${labelText({ ...labels, le: formatValue(bound * scale) })} ${cumulative}`);
    });
    cumulative += counts[bounds.length] ?? 0;
    f.lines.push(`${name}_bucket${labelText({ ...labels, le: "+Inf" })} ${cumulative}`);
    f.lines.push(`${name}_sum${labelText(labels)} ${formatValue(sum * scale)}`);
    f.lines.push(`${name}_count${labelText(labels)} ${cumulative}`);
  }

  text(): string {
    const out: string[] = [];
    for (const [name, f] of this.families) out.push(`# HELP ${name} ${f.help}`, `# TYPE ${name} ${f.kind}`, ...f.lines);
    return out.join("\n") + "\n";
  }

  private family(name: string, kind: Kind, help: string) {
    let f = this.families.get(name);
    if (!f) this.families.set(name, (f = { help, kind, lines: [] }));
    return f;
  }
}

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}
