/**
 * Deterministic synthetic text. Workloads need prompts whose *text* shares prefixes exactly where
 * the modelled prompts share content, so that requests go through the production text path
 * (canonicalisation, then chained block hashing) rather than handing the router ready-made ids.
 *
 * Text is built from a fixed pool of 64-character pieces; an entity (a trace hash id, a document,
 * a user turn ...) is a sequence of pieces chosen by an integer hash of (kind, id, position). Same
 * entity -> same text; different entities share a 512-character router block only with
 * probability ~4096^-8. Building text by concatenating pooled strings keeps generation cheap
 * next to hashing, which is what we want to exercise.
 */
import { seededRandom } from "../src/core/random.ts";
import type { CanonicalPrompt } from "../src/core/canonical.ts";

const PIECE_CHARS = 64;
const POOL_SIZE = 4096;

const POOL: string[] = (() => {
  const rnd = seededRandom(0x5eed);
  const letters = "etaoinshrdlcumwfgypbvkjxqz";
  const pool: string[] = [];
  for (let p = 0; p < POOL_SIZE; p++) {
    let s = "";
    while (s.length < PIECE_CHARS) {
      const len = 1 + Math.floor(rnd() * 9);
      for (let i = 0; i < len; i++) s += letters[Math.floor(Math.pow(rnd(), 2) * letters.length)];
      s += " ";
    }
    pool.push(s.slice(0, PIECE_CHARS));
  }
  return pool;
})();

/** murmur3's 32-bit finaliser: a cheap, well-mixed integer hash. */
export function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** Text of entity (`kind`, `id`), `chars` long. A shorter length is a prefix of a longer one. */
export function entityText(kind: number, id: number, chars: number): string {
  const pieces = Math.ceil(chars / PIECE_CHARS);
  const parts = new Array<string>(pieces);
  const base = mix32(mix32(kind * 0x9e3779b1 + 0x7f4a7c15) ^ id) ^ mix32(Math.floor(id / 4294967296));
  for (let j = 0; j < pieces; j++) parts[j] = POOL[mix32(base + Math.imul(j, 0x27d4eb2d)) % POOL_SIZE]!;
  const s = parts.join("");
  return s.length === chars ? s : s.slice(0, chars);
}

/** Entity kinds, so a document and a user turn with the same number never share text. */
export const KIND = {
  traceBlock: 1,
  system: 2,
  document: 3,
  userTurn: 4,
  answer: 5,
} as const;

/**
 * A chat prompt of about `chars` characters: a system prompt and alternating turns of 1,500 to
 * 4,500 characters. Shared by the hashing benchmarks (bench/hash.ts under Node, bench/workerd in
 * workerd), so both tables are of the same prompts.
 */
export function chatPrompt(chars: number): CanonicalPrompt {
  const messages = [{ role: "system", content: entityText(KIND.system, 1, Math.min(4000, Math.floor(chars / 4))) }];
  let left = chars - messages[0]!.content.length;
  for (let turn = 0; left > 0; turn++) {
    const n = Math.min(left, 1500 + ((turn * 7919) % 3000));
    messages.push({ role: turn % 2 === 0 ? "user" : "assistant", content: entityText(KIND.userTurn, turn, n) });
    left -= n;
  }
  return { kind: "chat", messages };
}
