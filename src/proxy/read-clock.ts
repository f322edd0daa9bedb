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
  private waiting: { due: number; kind: "idle" | "deadline"; reader: ReadableStreamDefaultReader<Uint8Array> } | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
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
    this.timer ??= setTimeout(() => this.fire(), wait);
    return reader.read();
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
    this.waiting = undefined;
  }

  private fire(): void {
    this.timer = undefined;
    const waiting = this.waiting;
    if (!waiting) return;
    const left = waiting.due - Date.now();
    if (left > 0) {
      this.timer = setTimeout(() => this.fire(), left);
      return;
    }
    this.waiting = undefined;
    this.timedOut = waiting.kind;
    // Settles the read waiting; the node's work on the request stops with it.
    void waiting.reader.cancel(new Error(`${waiting.kind} timeout`)).catch(() => {});
  }
}
