/**
 * Admission through the real workers and region object (docs/ADMISSION.md): a request no node can
 * serve within its objective is shed at once with 429 `objective_unreachable` and a Retry-After; one
 * that can be served after the node's current prefill waits in the region's queue and is placed
 * when that prefill's first byte comes; the class headers are checked at the edge.
 */
import { describe, expect, it } from "vitest";
import { chat, registerAll } from "../helpers.ts";
import { SLOW_FIRST_MS } from "../fixtures/fake-node.ts";

const pinned = { "x-warmpath-region": "us" };
/** A prompt of about `tokens` tokens (4 characters each). */
const body = (model: string, tokens: number, tag: string) => ({
  model,
  stream: true,
  messages: [{ role: "user", content: `${tag} ` + "lorem ipsum ".repeat(Math.ceil((tokens * 4) / 12)) }],
});

describe("admission by objective", () => {
  it("sheds at once what no node can serve within its objective: 429 objective_unreachable, with Retry-After", async () => {
    await registerAll([{ id: "adm-shed-1", region: "us", mode: "hangfirst", models: ["m-adm-shed"] }]);
    // 25,000 tokens: 2.5 s of prefill queued on the only node (which then says nothing).
    const long = chat(body("m-adm-shed", 25_000, "long"), { headers: pinned });
    await new Promise((r) => setTimeout(r, 300));
    // 250 tokens: its objective is 1 s, out of reach behind 2.5 s.
    const res = await chat(body("m-adm-shed", 250, "short"), { headers: pinned });
    expect(res.status).toBe(429);
    const retryAfter = Number(res.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    const err = (await res.json()) as { error: { type: string; code: string; param: unknown; message: string } };
    expect(err.error).toMatchObject({ type: "rate_limit_error", code: "objective_unreachable", param: null });
    expect(err.error.message).toContain("objective");
    // Why: the first token the region predicted for it, past its 1 s objective (behind 2.5 s of prefill).
    const predicted = Number(/first token predicted in (\d+) ms/.exec(err.error.message)?.[1]);
    expect(predicted).toBeGreaterThan(1_000);
    // A tighter objective than its tenant's is accepted, a class above its tenant's is not.
    const refused = await chat(body("m-adm-shed", 250, "vip"), { headers: { ...pinned, "x-warmpath-priority": "interactive" } });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string; param: string } }).error).toMatchObject({
      code: "priority_not_allowed",
      param: "x-warmpath-priority",
    });
    // The long one's node never answers within the first-byte timeout: it ends as a failure, not lost.
    await (await long).arrayBuffer();
  }, 30_000);

  it("holds what fits after the node's prefill, and places it when that prefill's first byte comes", async () => {
    await registerAll([{ id: "adm-queue-1", region: "us", mode: "slowfirst", models: ["m-adm-queue"] }]);
    // 40,000 tokens: 4 s predicted (the node takes SLOW_FIRST_MS); the next one's objective (10 s
    // for 20,000 tokens) can be met after it, but not within the dispatch bound now: it waits.
    const first = chat(body("m-adm-queue", 40_000, "first"), { headers: pinned });
    await new Promise((r) => setTimeout(r, 100));
    const sentAt = Date.now();
    const second = await chat(body("m-adm-queue", 20_000, "second"), { headers: { ...pinned, "x-warmpath-priority": "batch" } });
    expect(second.status).toBe(200);
    expect(second.headers.get("x-warmpath-priority")).toBe("batch");
    expect(Number(second.headers.get("x-warmpath-ttft-objective-ms"))).toBeGreaterThan(5_000);
    const queued = Number(second.headers.get("x-warmpath-queued-ms"));
    // Released by the first request's first byte, not before.
    expect(queued).toBeGreaterThanOrEqual(SLOW_FIRST_MS / 2);
    expect(Date.now() - sentAt).toBeGreaterThanOrEqual(queued);
    await second.text();
    const f = await first;
    expect(f.status).toBe(200);
    expect(f.headers.get("x-warmpath-queued-ms")).toBe("0");
    await f.text();
  });
});
