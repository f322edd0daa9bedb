/**
 * A per-isolate bound on log lines a client can cause (docs/OBSERVABILITY.md, "Decision log",
 * "Refusals" and "Traces"): at most `perSecond` lines a second for each key; past it lines are only counted, and
 * one summary line (`event`, the window's length and the count by key) says how many when the
 * second is over, written with the first line asked for after it.
 *
 * A flood must not turn logging into its amplifier: a refused request costs the router a few
 * microseconds, its lines ~1-3 KB of Workers Logs each (1.34 MB for 400 budget refusals with a
 * sampled `traceparent` before this bound; docs/OBSERVABILITY.md has the figure after).
 */

/** Distinct keys counted in one second: keys come from the router's own closed sets (codes, services). */
export const MAX_LOG_KEYS = 256;

export class LogLimiter {
  private window = { start: -Infinity, lines: new Map<string, number>(), suppressed: new Map<string, number>() };

  /**
   * @param event the summary line's `event` (`refusals_suppressed`, `spans_suppressed`, `decisions_suppressed`).
   * @param perSecond lines a second for one key.
   * @param write where a summary line goes (console.log by default).
   */
  private readonly event: string;
  private readonly perSecond: number;
  private readonly write: (line: string) => void;

  constructor(event: string, perSecond: number, write: (line: string) => void = (line) => console.log(line)) {
    this.event = event;
    this.perSecond = perSecond;
    this.write = write;
  }

  /** Whether a line of `key` may be written at `now` (ms); if not, it is counted for the summary. */
  allow(key: string, now: number): boolean {
    if (now - this.window.start >= 1000) {
      if (this.window.suppressed.size) {
        this.write(
          JSON.stringify({ event: this.event, window_ms: now - this.window.start, counts: Object.fromEntries(this.window.suppressed) }),
        );
      }
      this.window = { start: now, lines: new Map(), suppressed: new Map() };
    }
    const written = this.window.lines.get(key) ?? 0;
    if (written < this.perSecond && (this.window.lines.size < MAX_LOG_KEYS || this.window.lines.has(key))) {
      this.window.lines.set(key, written + 1);
      return true;
    }
    if (this.window.suppressed.size < MAX_LOG_KEYS || this.window.suppressed.has(key)) {
      this.window.suppressed.set(key, (this.window.suppressed.get(key) ?? 0) + 1);
    }
    return false;
  }
}
