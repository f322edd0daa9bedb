/**
 * The official OpenAI and Anthropic SDKs, unchanged, against the router: only their documented
 * `fetch` option is set, to call the worker in this test's workerd instead of the network.
 * `models.retrieve`, `responses.create` (and a follow-up by `previous_response_id`), streamed
 * `chat.completions.create`, and Anthropic's `messages.create` with `x-api-key`.
 */
import Anthropic from "@anthropic-ai/sdk";
import { exports } from "cloudflare:workers";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { ACME_KEY } from "../fixtures/config.ts";
import { BASE, registerAll } from "../helpers.ts";

/** Every request the SDK makes goes to the worker, pinned to region `us` (whose nodes are fake). */
const viaWorker = (input: string | URL | Request, init?: RequestInit) => {
  const request = new Request(input, init);
  request.headers.set("x-warmpath-region", "us");
  return exports.default.fetch(request);
};

const openai = new OpenAI({ apiKey: ACME_KEY, baseURL: `${BASE}/v1`, fetch: viaWorker, maxRetries: 0 });
const anthropic = new Anthropic({ apiKey: ACME_KEY, baseURL: BASE, fetch: viaWorker, maxRetries: 0 });

describe("the official SDKs", () => {
  it("OpenAI: models.retrieve, and a missing model as the SDK's NotFoundError", async () => {
    const model = await openai.models.retrieve("org/base-7b");
    expect(model.id).toBe("org/base-7b");
    await expect(openai.models.retrieve("nope")).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("OpenAI: responses.create, then a follow-up by previous_response_id on the node that stores it", async () => {
    await registerAll(["sdk-a", "sdk-b", "sdk-c"].map((id) => ({ id, region: "us", models: ["m-api"] })));
    const first = await openai.responses.create({ model: "m-api", instructions: "Be brief.", input: "First question " + "x ".repeat(400) });
    expect(first.id).toMatch(/^resp_/);
    await new Promise((r) => setTimeout(r, 20));
    const followUp = await openai.responses
      .create({ model: "m-api", input: "Unrelated follow-up", previous_response_id: first.id })
      .withResponse();
    expect(followUp.response.headers.get("x-warmpath-decision")).toBe("pinned");
    expect(followUp.data.id).toMatch(/^resp_/);
  });

  it("OpenAI: a streamed chat completion arrives whole, without the usage event the router asked the node for", async () => {
    await registerAll([{ id: "sdk-s", region: "us", models: ["m-api"] }]);
    const stream = await openai.chat.completions.create({ model: "m-api", stream: true, messages: [{ role: "user", content: "Hi" }] });
    let text = "";
    let sawUsage = false;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      if (chunk.usage) sawUsage = true;
    }
    // Every word the node sent, in order (the region's other m-api nodes may answer).
    expect(text).toMatch(/^Hello from sdk-[a-z]\. Prefix caches matter\.$/);
    expect(sawUsage).toBe(false);
  });

  it("Anthropic: messages.create with the key in x-api-key", async () => {
    await registerAll([{ id: "sdk-m", region: "us", models: ["m-api"] }]);
    const message = await anthropic.messages.create({
      model: "m-api",
      max_tokens: 16,
      system: "You are terse.",
      messages: [{ role: "user", content: "Hi" }],
    });
    expect(message.content[0]).toMatchObject({ type: "text", text: expect.stringMatching(/^Hello from sdk-[a-z]\.$/) });
    expect(message.usage.cache_read_input_tokens).toBeGreaterThan(0);
  });
});
