/**
 * One simulated node for a test file: fast (prefill 50,000 and decode 5,000 tokens a second, time
 * x10), roomy (100,000 tokens of KV, 16 running), serving `MODEL`, answering `defaultMaxTokens`
 * tokens when a request does not say.
 */
import { startNode, type NodeHandle } from "../node.ts";

export const MODEL = "llama-3.1-8b-instruct";

export function startTestNode(id: string, defaultMaxTokens: number): Promise<NodeHandle> {
  return startNode({
    id,
    region: "test-region",
    models: [MODEL],
    kvCapacityTokens: 100_000,
    prefillTokensPerSecond: 50_000,
    decodeTokensPerSecond: 5_000,
    maxRunning: 16,
    timeFactor: 10,
    defaultMaxTokens,
  });
}
