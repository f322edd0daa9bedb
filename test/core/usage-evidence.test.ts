import { describe, expect, it } from "vitest";
import { PrefixIndex } from "../../src/core/prefix-index.ts";
import { emptyMetrics } from "../../src/core/region/metrics.ts";
import { chainHashes, learnFromUsage, touchedSamples, type EvidenceContext } from "../../src/core/region/usage-evidence.ts";

/** Tokens a block: prompts of 20-40 blocks are well past the one engine block (512 tokens) agreement allows. */
const BLOCK = 128;
const chain = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}:${String(i).padStart(4, "0")}`.padEnd(16, "0"));

/** A region's index with node `a`, the settings, and the nodes whose claims were dropped. */
function region(learn = true) {
  const index = new PrefixIndex();
  index.setNode("a", 1_000);
  const dropped: string[] = [];
  const ctx: EvidenceContext = { index, settings: { blockTokens: BLOCK, learnFromUsage: learn }, dropClaims: (id) => dropped.push(id) };
  return { index, ctx, dropped, node: { metrics: emptyMetrics(), silentMisses: 0 } };
}

/** A prompt believed cached whole on `a`, dispatched there again (touched sampled first, as placement does). */
function dispatch(index: PrefixIndex, hashes: string[]) {
  const touched = touchedSamples(index, "a", hashes, hashes.length);
  index.insert("a", hashes);
  const tokens = hashes.length * BLOCK;
  return { nodeId: "a", promptTokens: tokens, chain: hashes.join(""), matchBlocks: hashes.length, predictedCachedTokens: tokens, touched };
}

describe("usage evidence", () => {
  it("splits a ticket's joined chain back into its block hashes", () => {
    const hashes = chain("p", 5);
    expect(chainHashes(hashes.join(""))).toEqual(hashes);
  });

  it("samples when the index last touched a prefix at depths 0, 1, 2, 4, ... and the deepest", () => {
    const { index } = region();
    const hashes = chain("p", 10);
    index.insert("a", hashes);
    expect(touchedSamples(index, "a", hashes, 10).map(([depth]) => depth)).toEqual([0, 1, 2, 4, 8, 9]);
    // Deeper blocks were touched earlier (an insert touches a prompt last to first).
    const seqs = touchedSamples(index, "a", hashes, 10).map(([, seq]) => seq);
    expect([...seqs].sort((x, y) => y - x)).toEqual(seqs);
    expect(touchedSamples(index, "b", hashes, 10)).toEqual([]);
  });

  it("an answer with less cached than predicted forgets the node's blocks touched before the first missing one", () => {
    const { index, ctx, node } = region();
    const older = chain("q", 8);
    index.insert("a", older);
    const prompt = chain("p", 40);
    index.insert("a", prompt);
    const t = dispatch(index, prompt);
    learnFromUsage(ctx, node, t, t.promptTokens, 4 * BLOCK);
    expect(node.metrics.corrections).toBe(1);
    // The older prompt, touched before the first block missing, is gone from an LRU that lost that block.
    expect(node.metrics.correctedBlocks).toBe(8);
    expect(index.matchDepths(older, ["a"])).toEqual([0]);
    // This prompt stays believed whole: the node has just computed it.
    expect(index.matchDepths(prompt, ["a"])).toEqual([40]);
    expect(node.metrics.compared).toBe(1);
    expect(node.metrics.agreed).toBe(0);
  });

  it("an answer that agrees corrects nothing", () => {
    const { index, ctx, node } = region();
    const prompt = chain("p", 40);
    index.insert("a", prompt);
    const t = dispatch(index, prompt);
    learnFromUsage(ctx, node, t, t.promptTokens, t.promptTokens);
    expect(node.metrics.corrections).toBe(0);
    expect(node.metrics.agreed).toBe(1);
    expect(index.matchDepths(prompt, ["a"])).toEqual([40]);
  });

  it("three answers in a row with nothing cached of recent prefixes: the node lost its cache, all but the last prompt is forgotten and its claims dropped", () => {
    const { index, ctx, node, dropped } = region();
    const prompts = ["p", "q", "r"].map((p) => chain(p, 20));
    for (const [i, prompt] of prompts.entries()) {
      index.insert("a", prompt);
      const t = dispatch(index, prompt);
      learnFromUsage(ctx, node, t, t.promptTokens, 0);
      expect(node.metrics.silentRestarts).toBe(i === 2 ? 1 : 0);
    }
    expect(dropped).toEqual(["a"]);
    expect(node.silentMisses).toBe(0);
    expect(index.blocksOf("a")).toBe(20);
    expect(index.matchDepths(prompts[2]!, ["a"])).toEqual([20]);
    expect(index.matchDepths(prompts[0]!, ["a"])).toEqual([0]);
  });

  it("an answer with something cached resets the count of silent misses", () => {
    const { index, ctx, node } = region();
    for (const [i, p] of ["p", "q", "r", "s"].entries()) {
      const prompt = chain(p, 20);
      index.insert("a", prompt);
      const t = dispatch(index, prompt);
      // The third answer has half its prompt cached: the misses before it were evictions.
      learnFromUsage(ctx, node, t, t.promptTokens, i === 2 ? 10 * BLOCK : 0);
    }
    expect(node.metrics.silentRestarts).toBe(0);
    expect(node.silentMisses).toBe(1);
  });

  it("with learnFromUsage off, answers are compared and counted but the index is left alone", () => {
    const { index, ctx, node } = region(false);
    const prompt = chain("p", 40);
    index.insert("a", prompt);
    const t = dispatch(index, prompt);
    learnFromUsage(ctx, node, t, t.promptTokens, 0);
    expect(node.metrics.compared).toBe(1);
    expect(node.metrics.corrections).toBe(0);
    expect(index.matchDepths(prompt, ["a"])).toEqual([40]);
  });
});
