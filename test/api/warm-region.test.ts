/**
 * Cache-aware choice across regions, end to end in workerd: a long prompt whose prefix a farther
 * region holds goes there once the edge has that region's digest; short prompts and tenants
 * restricted to other regions never do.
 */
import { describe, expect, it } from "vitest";
import { CF_FRANKFURT, CF_VIRGINIA, chat, deregister, longSystemPrompt, registerAll } from "../helpers.ts";
import { EUONLY_KEY } from "../fixtures/config.ts";

/** A ~30,000-token document (120,000 characters), then the question. */
function longPrompt(doc: string, question: string) {
  let text = "";
  for (let i = 0; text.length < 120_000; i++) text += longSystemPrompt(`${doc} part ${i}`);
  return {
    model: "m-warm",
    messages: [
      { role: "system", content: text },
      { role: "user", content: question },
    ],
  };
}

async function send(body: unknown, options: Parameters<typeof chat>[1] = {}) {
  const res = await chat(body, options);
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return { region: res.headers.get("x-warmpath-region"), choice: res.headers.get("x-warmpath-region-choice") };
}

/** Lets the waitUntil work of the last request (the digest refresh) finish. */
const settle = () => new Promise((r) => setTimeout(r, 100));

describe("a long prompt whose prefix a farther region holds", () => {
  it("goes to that region, says so, and keeps going there; the nearest stays next in line", async () => {
    await registerAll([
      { id: "warm-eu", region: "eu", models: ["m-warm"] },
      { id: "warm-us", region: "us", models: ["m-warm"] },
    ]);
    // The document is first used from America: region us learns it, and the edge, once the
    // request is placed, asks the regions for their digests (after answering: no request waits).
    expect((await send(longPrompt("contract", "first question"), { cf: CF_VIRGINIA })).region).toBe("us");
    await settle();
    // From Frankfurt eu is nearest, but us holds ~30k tokens of the prompt (3 s of prefill) against
    // ~100 ms more round trip.
    for (let i = 0; i < 3; i++) {
      const warm = await send(longPrompt("contract", `question ${i} from Europe`), { cf: CF_FRANKFURT });
      expect(warm.region).toBe("us");
      expect(warm.choice).toMatch(/^warm-prefix; nearest=eu; held-tokens=\d+$/);
    }
    // A document nobody holds still goes to the nearest region.
    expect((await send(longPrompt("another", "q"), { cf: CF_FRANKFURT })).region).toBe("eu");
    // The warm region gone (the edge's digest still names it): the nearest region serves, next in line.
    expect((await deregister("us", "warm-us")).status).toBe(200);
    expect((await send(longPrompt("contract", "after us lost its node"), { cf: CF_FRANKFURT })).region).toBe("eu");
  });

  it("never moves a short prompt, whatever the digests say", async () => {
    await registerAll([
      { id: "warm-eu", region: "eu", models: ["m-warm"] },
      { id: "warm-us", region: "us", models: ["m-warm"] },
    ]);
    const short = { model: "m-warm", messages: [{ role: "user", content: "a short question" }] };
    expect((await send(short, { cf: CF_VIRGINIA })).region).toBe("us");
    await settle();
    const again = await send(short, { cf: CF_FRANKFURT });
    expect(again.region).toBe("eu");
    expect(again.choice).toBeNull();
  });
});

describe("a tenant restricted to some regions (data residency)", () => {
  it("is routed only there, never failed over or sent for a warm prefix elsewhere", async () => {
    await registerAll([
      { id: "warm-eu", region: "eu", models: ["m-warm"] },
      { id: "warm-us", region: "us", models: ["m-warm"] },
    ]);
    // From America, us is nearest, but this tenant may only use eu.
    const short = { model: "m-warm", messages: [{ role: "user", content: "residency" }] };
    expect((await send(short, { key: EUONLY_KEY, cf: CF_VIRGINIA })).region).toBe("eu");
    await send(longPrompt("residency-doc", "q"), { cf: CF_VIRGINIA }); // another tenant warms us (its own namespace)
    await settle();
    expect((await send(longPrompt("residency-doc", "q2"), { key: EUONLY_KEY, cf: CF_FRANKFURT })).region).toBe("eu");
  });

  it("is refused a pinned region outside its list", async () => {
    const res = await chat(
      { model: "m-warm", messages: [{ role: "user", content: "x" }] },
      { key: EUONLY_KEY, headers: { "x-warmpath-region": "us" } },
    );
    expect(res.status).toBe(403);
    const body = await res.json<{ error: { code: string; param: string; message: string } }>();
    expect(body.error.code).toBe("region_not_allowed");
    expect(body.error.param).toBe("x-warmpath-region");
    expect(body.error.message).toBe("This API key may not use the region named in x-warmpath-region");
  });
});
