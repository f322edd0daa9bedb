/** Prompt text for the tiny generated model (make-gguf.ts), shared by the recordings and the end-to-end run. */

/** Words that are single tokens in the tiny model's vocab: N words ≈ N tokens. */
const WORDS = "the cache token prompt server model request slot user system hello world data node route warm path".split(" ");

/** Deterministic pseudo-random text of `n` single-token words. */
export function text(n: number, seed: number): string {
  let s = seed >>> 0;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    out.push(WORDS[(s >>> 8) % WORDS.length] ?? "the");
  }
  return out.join(" ");
}
