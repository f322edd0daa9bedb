/**
 * The edge's failover between region workers (src/edge/forward.ts, src/edge/region-client.ts):
 * a region whose worker cannot be reached, speaks another contract, or answers as no region
 * worker would is a failed region, and the next region serves; a region worker lost mid-stream
 * ends the client's SSE answer with an error event.
 */
import { env } from "cloudflare:workers";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { createApp } from "../../src/edge/app.ts";
import { CONTRACT_HEADER, REFUSAL_HEADER, REGION_CONTRACT_VERSION } from "../../src/contracts/region-service.ts";
import { regionBindingName } from "../../src/contracts/topology.ts";
import { ACME_KEY } from "../fixtures/config.ts";
import { BASE, CF_FRANKFURT, registerAll, withRegionService } from "../helpers.ts";

/** A chat request from Frankfurt (eu is nearest) through the edge, with `eu`'s worker replaced by `euWorker`. */
async function send(euWorker: { fetch: (input: RequestInfo | URL, init?: RequestInit) => Promise<Response> }, body: object) {
  const ctx = createExecutionContext();
  const bound = withRegionService(env, ctx) as unknown as Record<string, unknown>;
  bound[regionBindingName("eu")] = euWorker;
  const res = await createApp().fetch(
    new Request(`${BASE}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}` },
      body: JSON.stringify(body),
      cf: CF_FRANKFURT,
    } as RequestInit) as Request<unknown, IncomingRequestCfProperties>,
    bound as unknown as Env,
    ctx,
  );
  const text = await res.text();
  await waitOnExecutionContext(ctx);
  return { res, text };
}

const question = (text: string) => ({ model: "m-shared", messages: [{ role: "user", content: text }] });

describe("a region whose worker fails", () => {
  it("is a failed region when its worker cannot be reached: the next region serves", async () => {
    await registerAll([{ id: "fw-us", region: "us", models: ["m-shared"] }]);
    const error = vi.spyOn(console, "error");
    const { res } = await send({ fetch: () => Promise.reject(new Error("connection refused")) }, question("unreachable eu"));
    expect(res.status).toBe(200);
    expect(res.headers.get("x-warmpath-region")).toBe("us");
    expect(res.headers.get("x-warmpath-decision")).toBe("failover");
    expect(res.headers.get("x-warmpath-attempts")).toBe("2");
    expect(res.headers.has(CONTRACT_HEADER)).toBe(false); // between the workers only
    expect(error.mock.calls.some(([line]) => String(line).includes('"event":"region_unavailable"'))).toBe(true);
    error.mockRestore();
  });

  it("is a failed region when it speaks another contract version, and says so in the log", async () => {
    await registerAll([{ id: "fw-us", region: "us", models: ["m-shared"] }]);
    const error = vi.spyOn(console, "error");
    const newer = {
      fetch: async () =>
        Response.json(
          {
            reason: "contract-mismatch",
            message: "region worker speaks contract 7-7, the edge sent 1",
            retryAfterSeconds: 1,
            attempts: [],
          },
          { status: 503, headers: { [CONTRACT_HEADER]: "7", [REFUSAL_HEADER]: "contract-mismatch" } },
        ),
    };
    const { res } = await send(newer, question("skewed eu"));
    expect(res.status).toBe(200);
    expect(res.headers.get("x-warmpath-region")).toBe("us");
    expect(error.mock.calls.some(([line]) => String(line).includes('"event":"region_contract_mismatch"'))).toBe(true);
    error.mockRestore();
  });

  it("never takes an answer without a contract version (the runtime's error page) for the region's", async () => {
    await registerAll([{ id: "fw-us", region: "us", models: ["m-shared"] }]);
    const { res, text } = await send(
      { fetch: async () => new Response("Worker threw exception", { status: 500 }) },
      question("error page"),
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("x-warmpath-region")).toBe("us");
    expect(text).not.toContain("Worker threw exception");
  });

  it("answers 503 region_unavailable in OpenAI's shape when no region worker can be reached", async () => {
    const down = { fetch: () => Promise.reject(new Error("connection refused")) };
    const ctx = createExecutionContext();
    const bound = { ...env, REGION_WORKERS: down } as unknown as Env;
    const res = await createApp().fetch(
      new Request(`${BASE}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}` },
        body: JSON.stringify(question("everything down")),
        cf: CF_FRANKFURT,
      } as RequestInit) as Request<unknown, IncomingRequestCfProperties>,
      bound,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(res.status).toBe(503);
    const { error } = (await res.json()) as { error: { code: string; message: string; type: string } };
    expect(error.code).toBe("region_unavailable");
    expect(error.message).toMatch(/No region can be reached now \(tried 2\)/);
    expect(error.message).not.toMatch(/connection refused/); // the detail is logged, not shown
    expect(res.headers.get("retry-after")).toBe("1");
  });

  it("ends a streamed answer with an SSE error event when the region worker is lost mid-stream", async () => {
    const first = 'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n';
    const lost = {
      fetch: async () => {
        let sent = false;
        const body = new ReadableStream<Uint8Array>({
          pull(controller) {
            if (sent) return controller.error(new Error("Network connection lost."));
            sent = true;
            controller.enqueue(new TextEncoder().encode(first));
          },
        });
        return new Response(body, {
          headers: { "content-type": "text/event-stream", [CONTRACT_HEADER]: String(REGION_CONTRACT_VERSION), "x-warmpath-region": "eu" },
        });
      },
    };
    const { res, text } = await send(lost, { ...question("cut short"), stream: true });
    expect(res.status).toBe(200);
    expect(text.startsWith(first)).toBe(true);
    expect(text).toContain('"code":"region_stream_lost"');
    expect(text).not.toContain("[DONE]");
  });
});
