/**
 * GET /: the bare address names the API, the dashboard and the docs (it was a 404 with no pointer),
 * as JSON for API clients and as a page of links for a browser; and what it names exists.
 */
import { describe, expect, it } from "vitest";
import { call } from "../../helpers.ts";
import { ACME_KEY } from "../../fixtures/config.ts";
import { DASHBOARD_PATH, ROOT_INDEX } from "../../../src/edge/api/root.ts";

describe("GET /", () => {
  it("answers API clients with JSON naming the API base, its endpoints, the dashboard and the docs", async () => {
    const res = await call("/", { headers: { accept: "application/json" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(res.headers.get("x-request-id")).toBeTruthy();
    const body = (await res.json()) as typeof ROOT_INDEX;
    expect(body.api.base).toBe("/v1");
    expect(body.api.endpoints).toContain("POST /v1/chat/completions");
    expect(body.api.endpoints).toContain("GET /v1/models");
    expect(body.dashboard).toBe("/dashboard/");
    expect(body.docs).toContain("docs/API.md");
    // Without an Accept header too (curl's default is */*).
    const plain = await call("/");
    expect(plain.status).toBe(200);
    expect(plain.headers.get("content-type")).toContain("application/json");
  });

  it("gives a browser a page linking to the dashboard", async () => {
    const res = await call("/", {
      headers: { accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.headers.get("vary")).toContain("accept");
    const html = await res.text();
    expect(html).toContain(`href="${DASHBOARD_PATH}"`);
    expect(html).toContain("/v1/chat/completions");
  });

  it("names paths that answer: the API it lists is served and the health check is up", async () => {
    const models = await call("/v1/models", { headers: { authorization: `Bearer ${ACME_KEY}` } });
    expect(models.status).toBe(200);
    expect((await call(ROOT_INDEX.health)).status).toBe(200);
  });

  it("is still 405 for another method, and other unknown paths are still 404", async () => {
    const post = await call("/", { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toContain("GET");
    expect((await call("/nowhere")).status).toBe(404);
  });
});
