/**
 * The fair share's say in where a request may go (fair-share.ts decides; this applies it to the
 * candidates): what the fair share is told of each candidate, and the candidates left once the
 * nodes held for the other tenants are taken away (or, for a light tenant, once it is sent to
 * them). A step of `RegionRouter.route` between admission and the saturation check, so the
 * saturation check and the policy judge only the nodes this request may really use.
 */
import type { Candidate } from "../policies/types.ts";
import type { NodeEntry } from "./node-table.ts";
import { HELD_CACHE_SHARE, type Admission, type ShareNode } from "./fair-share.ts";

/** The candidates and their node entries, index for index (the order policies see). */
export interface CandidateField {
  candidates: Candidate[];
  eligible: NodeEntry[];
}

/**
 * Whether a candidate holds most of the prompt: a heavy tenant may still use such a node though it
 * is held for the others, since what it adds to the queue there is small and sending it elsewhere
 * costs its cache (fair-share.ts, HELD_CACHE_SHARE).
 */
export function holdsPrompt(c: Candidate, promptTokens: number): boolean {
  return c.matchTokens >= HELD_CACHE_SHARE * promptTokens;
}

/** What the fair share is told of each candidate: its modelled wait, its rate, and whether it holds the prompt. */
export function shareNodes(candidates: readonly Candidate[], promptTokens: number): ShareNode[] {
  return candidates.map((c) => ({
    id: c.id,
    waitSeconds: c.workAheadTokens / c.prefillRate,
    prefillRate: c.prefillRate,
    holdsPrompt: holdsPrompt(c, promptTokens),
  }));
}

/**
 * The candidates an admitted request may use: a tenant building a queue keeps off the nodes held
 * for the others (`reserved`) unless one holds most of its prompt; a light tenant goes to the held
 * nodes (`preferred`). A follow-up of a stored response whose node (`pinnedNode`) is among the
 * candidates is never narrowed: anywhere else it would fail. Returns `field` itself when nothing
 * is taken away.
 */
export function holdForOthers(
  field: CandidateField,
  admission: Extract<Admission, { ok: true }>,
  pinnedNode: string | undefined,
  promptTokens: number,
): CandidateField {
  const narrowed =
    pinnedNode !== undefined && field.candidates.some((c) => c.id === pinnedNode) ? undefined : (admission.reserved ?? admission.preferred);
  if (!narrowed?.size) return field;
  const keep = field.candidates.map((c) => (admission.reserved ? !narrowed.has(c.id) || holdsPrompt(c, promptTokens) : narrowed.has(c.id)));
  return { candidates: field.candidates.filter((_, i) => keep[i]), eligible: field.eligible.filter((_, i) => keep[i]) };
}
