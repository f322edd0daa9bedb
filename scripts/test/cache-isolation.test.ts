/**
 * Engine-level cache isolation on the running system (wrangler dev + the simulated fleet, whose
 * engines partition their prefix cache by `cache_salt` as vLLM does): tenant B's first request
 * for tenant A's prompt is a miss on the engine, while A's own repeat is a hit; with
 * `engine_cache_isolation = "none"` the same request is a hit, the side channel the salt closes.
 * The model qwen2.5-7b-instruct has one node (use1-c), so both tenants meet on the same engine. ~25 s.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { DEV_API_KEY, DEV_API_KEY_2 } from "../../src/config/dev-credentials.ts";
import { devConfigWithPolicy } from "../demo/policy-config.ts";
import { startSystem, type System } from "../system.ts";

/** ~6,000 tokens: far more than one engine block, so a shared cache shows plainly. */
const SECRET_DOCUMENT = "Tenant A's confidential merger memo, paragraph by paragraph. ".repeat(400);

async function cached(system: System, key: string): Promise<{ cached: number; prompt: number; node: string }> {
  const res = await fetch(`${system.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-warmpath-region": "us-east" },
    body: JSON.stringify({
      model: "qwen2.5-7b-instruct",
      max_tokens: 2,
      messages: [{ role: "user", content: SECRET_DOCUMENT }],
    }),
  });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } };
  return {
    cached: body.usage.prompt_tokens_details.cached_tokens,
    prompt: body.usage.prompt_tokens,
    node: res.headers.get("x-warmpath-node")!,
  };
}

async function withSystem(isolation: "cache_salt" | "none", run: (s: System) => Promise<void>) {
  const config = devConfigWithPolicy("warmpath") as { regions: Array<Record<string, unknown>> };
  for (const r of config.regions) r.engine_cache_isolation = isolation;
  const system = await startSystem({ port: 0, timeFactorScale: 20, config });
  try {
    await run(system);
  } finally {
    await system.stop();
  }
}

test("with cache_salt (the default), another tenant's identical prompt is a miss on the engine; the owner's repeat a hit", async () => {
  await withSystem("cache_salt", async (s) => {
    const a = await cached(s, DEV_API_KEY);
    assert.equal(a.cached, 0);
    const b = await cached(s, DEV_API_KEY_2);
    assert.equal(b.node, a.node, "the same engine");
    assert.equal(b.cached, 0, "tenant B sees nothing of tenant A's cache");
    const again = await cached(s, DEV_API_KEY);
    assert.ok(again.cached > 0.9 * again.prompt, `tenant A's own cache stays warm (${again.cached} of ${again.prompt})`);
  });
});

test("with engine_cache_isolation = none, the same request is a hit on the engine (what the salt prevents)", async () => {
  await withSystem("none", async (s) => {
    await cached(s, DEV_API_KEY);
    const b = await cached(s, DEV_API_KEY_2);
    assert.ok(b.cached > 0.9 * b.prompt, `shared engine cache: ${b.cached} of ${b.prompt}`);
  });
});
