/**
 * Timing the reads of a node's body for the relay (relay.ts): the idle wait between chunks and the
 * request's deadline.
 */

/** What a read of the node's body came to. */
export type Read = Awaited<ReturnType<ReadableStreamDefaultReader<Uint8Array>["read"]>>;

/**
 * The node's next chunk, or a timeout: the idle wait or the request's deadline, whichever is first.
 *
 * The read is the reader's own promise, with no wrapper: a timeout cancels the reader, which
 * settles the read waiting (done, or an error), and `timedOut` says which wait ran out: no promise
 * and callbacks of our own per SSE event, where every one is paid per token (bench/wan/RESULTS.md,
 * "relay per SSE event"). One timer serves every read of a body: a timer set and cleared around
 * each chunk cost ~15 µs of CPU per event in workerd. It is armed for the read waiting when it is
 * set; when it fires early (a later read started since), it is set again for what is left of that
 * read's wait.
 */
export class ReadClock {
  /** Which wait ran out (the reader was cancelled for it), once one has. */
  timedOut: "idle" | "deadline" | undefined;
  private waiting:
    | { due: number; kind: "idle" | "deadline"; reader: ReadableStreamDefaultReader<Uint8Array>; onDeadline?: undefined }
    | { due: number; kind: "deadline"; reader?: undefined; onDeadline: () => void }
    | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** When the timer fires (ms epoch). */
  private timerDue = Infinity;
  private readonly idleMs: number | undefined;
  private readonly deadlineAt: number | undefined;

  constructor(idleMs: number | undefined, deadlineAt: number | undefined) {
    this.idleMs = idleMs;
    this.deadlineAt = deadlineAt;
  }

  read(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<Read> {
    if (this.idleMs === undefined && this.deadlineAt === undefined) return reader.read();
    const now = Date.now();
    const untilDeadline = this.deadlineAt === undefined ? Infinity : Math.max(0, this.deadlineAt - now);
    const wait = Math.min(this.idleMs ?? Infinity, untilDeadline);
    this.waiting = { due: now + wait, kind: wait === untilDeadline ? "deadline" : "idle", reader };
    this.arm(now, now + wait);
    return reader.read();
  }

  /**
   * The relay waits for the client to take what it was given: past the request's deadline it is
   * `onDeadline`'s to end the answer (a client that stops reading would otherwise hold the answer,
   * and the node's place in the region's count, for as long as its connection lasts). The same
   * timer as the reads'; `settled` ends the wait. Without a deadline, nothing.
   */
  writing(onDeadline: () => void): void {
    if (this.deadlineAt === undefined) return;
    this.waiting = { due: this.deadlineAt, kind: "deadline", onDeadline };
    // No sooner than a read's idle wait would want it: the read that follows then finds the timer set.
    const now = Date.now();
    this.arm(now, Math.min(this.deadlineAt, now + (this.idleMs ?? Infinity)));
  }

  /**
   * The timer, for a wait due at `due`: the one set stays if it fires no later (when it fires early,
   * `fire` sets it again for what is left); one set for later is set again sooner.
   */
  private arm(now: number, due: number): void {
    if (this.timer !== undefined && this.timerDue <= due) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerDue = due;
    this.timer = setTimeout(() => this.fire(), Math.max(0, due - now));
  }

  /** Another node's body follows a timed-out one: its reads are timed afresh. */
  restart(): void {
    this.timedOut = undefined;
  }

  /** A read settled in time: nothing waits until the next. */
  settled(): void {
    this.waiting = undefined;
  }

  /** The body ended: its timer goes (it must not outlive the answer by the idle wait). */
  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerDue = Infinity;
    this.waiting = undefined;
  }

  private fire(): void {
    this.timer = undefined;
    this.timerDue = Infinity;
    const waiting = this.waiting;
    if (!waiting) return;
    const now = Date.now();
    if (waiting.due > now) return this.arm(now, waiting.due);
    this.waiting = undefined;
    if (waiting.onDeadline) return waiting.onDeadline();
    this.timedOut = waiting.kind;
    // Settles the read waiting; the node's work on the request stops with it.
    void waiting.reader.cancel(new Error(`${waiting.kind} timeout`)).catch(() => {});
  }
}
