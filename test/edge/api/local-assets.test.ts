/**
 * The dashboard's paths at the edge as deployed (no local asset worker bound: Cloudflare serves the
 * files before the worker, so only a path that names no file reaches it): the edge's 404 in
 * OpenAI's shape, not the 405 a path with a GET route would otherwise get. The local host's asset
 * worker, which serves the files under `npm start`, is covered by scripts/test/start.test.ts and
 * scripts/test/dashboard.test.ts.
 */
import { describe, expect, it } from "vitest";
import { call } from "../../helpers.ts";

describe("the dashboard's paths without the local asset worker", () => {
  it("answer a GET or HEAD for a file the assets do not have with 404 route_not_found", async () => {
    const res = await call("/dashboard/no-such-file.js");
    expect(res.status).toBe(404);
    const body = (await res.json()) as { error: { code: string; type: string; message: string } };
    expect(body.error.code).toBe("route_not_found");
    expect(body.error.type).toBe("not_found_error");
    expect(res.headers.get("x-request-id")).toBeTruthy();
    expect((await call("/dashboard/no-such-file.js", { method: "HEAD" })).status).toBe(404);
  });

  it("answer another method with 405 naming GET and HEAD", async () => {
    const res = await call("/dashboard/", { method: "POST" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
  });
});
