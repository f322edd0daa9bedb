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

/** POSTs `body` as JSON to the node; its status, text, parsed JSON (undefined if not JSON) and headers. */
export async function postJson(
  node: NodeHandle,
  path: string,
  body: unknown,
): Promise<{ status: number; text: string; json: any; headers: Headers }> {
  const res = await fetch(node.url + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json, headers: res.headers };
}

/** Events of an SSE text: `event:` name (if any) and parsed `data:` (`[DONE]` as is). */
export function sseEvents(text: string): { event: string | undefined; data: any }[] {
  return text
    .split("\n\n")
    .filter((e) => e.trim() !== "")
    .map((e) => {
      const lines = e.split("\n");
      const event = lines.find((l) => l.startsWith("event: "))?.slice(7);
      const raw = lines.find((l) => l.startsWith("data: "))!.slice(6);
      return { event, data: raw === "[DONE]" ? raw : JSON.parse(raw) };
    });
}
