/**
 * The local trace exporter (`npm start -- --traces <file|url>`, scripts/system.ts): takes the
 * workers' `spans` lines (src/proxy/spans.ts) from their console output and writes them as
 * OTLP/JSON `ExportTraceServiceRequest`s (resourceSpans -> scopeSpans -> spans, one resource per
 * worker: `service.name` warmpath-edge or warmpath-region):
 *
 * - to a file: one request per line (JSON Lines), appended as the lines come;
 * - to an OTLP/HTTP endpoint (`http://127.0.0.1:4318/v1/traces`: an OpenTelemetry Collector,
 *   Jaeger): POSTed with `content-type: application/json`, batched (every
 *   {@link FLUSH_INTERVAL_MS} ms, or at {@link BATCH_LINES} lines), from a bounded queue
 *   ({@link MAX_QUEUED_LINES} lines; past it the oldest are dropped and counted). A failed export
 *   is logged once (and once more when exports succeed again) and never holds up a request: the
 *   workers log their spans whatever becomes of them here.
 */
import { appendFileSync, writeFileSync } from "node:fs";
import type { OtlpSpan, SpansLine } from "../../src/contracts/trace.ts";

/** Lines sent in one POST at most. */
export const BATCH_LINES = 100;
/** How often queued lines are sent. */
export const FLUSH_INTERVAL_MS = 1_000;
/** Lines held while the endpoint is slow or down: about 1,000 requests' spans (~4 MB). */
export const MAX_QUEUED_LINES = 1_000;
/** A POST that takes longer is abandoned (and counted failed). */
const POST_TIMEOUT_MS = 5_000;

const MARKER = '{"event":"spans"';

/** The spans line in a line of a worker's output (wrangler dev may put a prefix before it), or undefined. */
export function spansLineOf(line: string): SpansLine | undefined {
  const at = line.indexOf(MARKER);
  if (at < 0) return undefined;
  try {
    const parsed = JSON.parse(line.slice(at)) as SpansLine;
    return parsed.event === "spans" && Array.isArray(parsed.spans) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** OTLP/JSON's ExportTraceServiceRequest for spans lines: one resource per service (and region). */
export function exportRequest(lines: readonly SpansLine[]): { resourceSpans: unknown[] } {
  const byResource = new Map<string, { service: string; region: string | undefined; spans: OtlpSpan[] }>();
  for (const l of lines) {
    const key = `${l.service}\u0000${l.region ?? ""}`;
    let entry = byResource.get(key);
    if (!entry) byResource.set(key, (entry = { service: l.service, region: l.region, spans: [] }));
    entry.spans.push(...l.spans);
  }
  return {
    resourceSpans: [...byResource.values()].map((r) => ({
      resource: {
        attributes: [
          { key: "service.name", value: { stringValue: r.service } },
          ...(r.region ? [{ key: "warmpath.region", value: { stringValue: r.region } }] : []),
        ],
      },
      scopeSpans: [{ scope: { name: "warmpath" }, spans: r.spans }],
    })),
  };
}

export interface TraceExporter {
  /** Takes one line of a worker's output (anything but a spans line is ignored). Never throws, never waits. */
  push(line: string): void;
  /** Sends what is queued (the file is written as lines come). */
  flush(): Promise<void>;
  /** Flushes and stops the timer. */
  stop(): Promise<void>;
  readonly stats: { lines: number; exported: number; dropped: number; failures: number };
}

/** An exporter to `target`: an `http(s)://` OTLP/HTTP traces endpoint, or else a file path (created or truncated). */
export function traceExporter(target: string, log: (message: string) => void = (m) => console.error(m)): TraceExporter {
  const stats = { lines: 0, exported: 0, dropped: 0, failures: 0 };
  const sink = /^https?:\/\//.test(target) ? otlpSink(target, stats, log) : fileSink(target, stats, log);
  return {
    stats,
    // Every target takes the spans lines alone, each counted once.
    push(line) {
      const spans = spansLineOf(line);
      if (!spans) return;
      stats.lines++;
      sink.take(spans);
    },
    flush: sink.flush,
    stop: sink.stop,
  };
}

/** Where an exporter's spans lines go: `take` never throws or waits. */
interface SpansSink {
  take(spans: SpansLine): void;
  flush(): Promise<void>;
  stop(): Promise<void>;
}

type ExportStats = TraceExporter["stats"];

/** A file (created or truncated): each spans line written as one OTLP request line as it comes. */
function fileSink(target: string, stats: ExportStats, log: (message: string) => void): SpansSink {
  writeFileSync(target, "");
  return {
    take(spans) {
      try {
        appendFileSync(target, JSON.stringify(exportRequest([spans])) + "\n");
        stats.exported++;
      } catch (e) {
        stats.failures++;
        if (stats.failures === 1) log(`warmpath: cannot write traces to ${target}: ${(e as Error).message}`);
      }
    },
    flush: () => Promise.resolve(),
    stop: () => Promise.resolve(),
  };
}

/** An OTLP/HTTP endpoint: batches of BATCH_LINES, sent when full and every FLUSH_INTERVAL_MS, at most MAX_QUEUED_LINES queued. */
function otlpSink(target: string, stats: ExportStats, log: (message: string) => void): SpansSink {
  const queue: SpansLine[] = [];
  let failing = false;
  let sending: Promise<void> = Promise.resolve();
  const send = async (): Promise<void> => {
    while (queue.length > 0) {
      const batch = queue.splice(0, BATCH_LINES);
      try {
        const res = await fetch(target, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(exportRequest(batch)),
          signal: AbortSignal.timeout(POST_TIMEOUT_MS),
        });
        await res.body?.cancel().catch(() => {});
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
        stats.exported += batch.length;
        if (failing) log(`warmpath: trace export to ${target} works again`);
        failing = false;
      } catch (e) {
        // The batch is dropped, not retried: a down collector must not grow the queue past its bound.
        stats.failures++;
        stats.dropped += batch.length;
        if (!failing) log(`warmpath: trace export to ${target} failed (${(e as Error).message}); spans are dropped until it answers`);
        failing = true;
        return;
      }
    }
  };
  const flush = () => (sending = sending.then(send));
  const timer = setInterval(() => void flush(), FLUSH_INTERVAL_MS);
  timer.unref();
  return {
    take(spans) {
      queue.push(spans);
      if (queue.length > MAX_QUEUED_LINES) {
        queue.shift();
        stats.dropped++;
      }
      if (queue.length >= BATCH_LINES) void flush();
    },
    flush,
    async stop() {
      clearInterval(timer);
      await flush();
    },
  };
}
