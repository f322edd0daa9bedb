/**
 * A binary min-heap of simulation events ordered by (time, sequence). The sequence number makes
 * the order of simultaneous events the order they were scheduled in, so a run is deterministic
 * whatever the heap's internal layout.
 */
export interface Timed {
  t: number;
  seq: number;
}

export class EventHeap<E extends Timed> {
  private readonly items: E[] = [];
  private nextSeq = 0;

  get size(): number {
    return this.items.length;
  }

  /** Earliest event time, or Infinity when empty. */
  peekTime(): number {
    return this.items.length > 0 ? this.items[0]!.t : Infinity;
  }

  /** Schedules `e` (its `seq` is assigned here). */
  push(e: E): void {
    e.seq = this.nextSeq++;
    const a = this.items;
    a.push(e);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }

  pop(): E | undefined {
    const a = this.items;
    if (a.length === 0) return undefined;
    const top = a[0]!;
    const last = a.pop()!;
    if (a.length > 0) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && before(a[l]!, a[m]!)) m = l;
        if (r < a.length && before(a[r]!, a[m]!)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m]!, a[i]!];
        i = m;
      }
    }
    return top;
  }
}

function before(x: Timed, y: Timed): boolean {
  return x.t < y.t || (x.t === y.t && x.seq < y.seq);
}
