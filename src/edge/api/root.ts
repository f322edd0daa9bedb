/**
 * `GET /`: where to go from here. A first visit to the router's address (a browser, or `curl` of
 * the URL `npm start` printed) used to meet 404 `route_not_found`; it now names the API, the
 * dashboard and the docs. JSON for API clients; a browser (it asks for `text/html` first) gets
 * the same as a small page of links. Nothing in it depends on the configuration or the request,
 * so it is served before the configuration is loaded and never echoes input.
 */
import type { Context } from "hono";
import type { AppEnv } from "../app-types.ts";

/** The dashboard's path: public/dashboard/, served by the worker's static assets. */
export const DASHBOARD_PATH = "/dashboard/";

/** What `GET /` answers, as JSON. */
export const ROOT_INDEX = {
  name: "warmpath",
  description: "Cache-aware edge router for LLM inference fleets, with an OpenAI-compatible API.",
  api: {
    base: "/v1",
    authentication: "Authorization: Bearer <API key>",
    endpoints: ["POST /v1/chat/completions", "POST /v1/completions", "POST /v1/responses", "POST /v1/messages", "GET /v1/models"],
  },
  dashboard: DASHBOARD_PATH,
  admin: ["GET /admin/state", "GET /admin/usage", "GET /metrics"],
  health: "/healthz",
  docs: "docs/API.md in the warmpath repository (the client API), docs/OBSERVABILITY.md (the dashboard, /admin and /metrics)",
} as const;

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>warmpath</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 2rem auto">
<h1>warmpath</h1>
<p>${ROOT_INDEX.description}</p>
<ul>
<li><a href="${DASHBOARD_PATH}">Dashboard</a>: each region and node live.</li>
<li>API base <code>/v1</code> (${ROOT_INDEX.api.authentication}): ${ROOT_INDEX.api.endpoints.map((e) => `<code>${e}</code>`).join(", ")}.</li>
<li>Admin: ${ROOT_INDEX.admin.map((e) => `<code>${e}</code>`).join(", ")}; health: <a href="/healthz"><code>/healthz</code></a>.</li>
<li>Docs: ${ROOT_INDEX.docs}.</li>
</ul>
</body></html>
`;

/** True when the client ranks `text/html` above JSON (a browser's `Accept`); `curl` and SDKs get JSON. */
function prefersHtml(accept: string | undefined): boolean {
  if (!accept) return false;
  const html = accept.indexOf("text/html");
  if (html < 0) return false;
  const json = accept.indexOf("application/json");
  return json < 0 || html < json;
}

export function rootIndex(c: Context<AppEnv>): Response {
  c.header("vary", "accept");
  if (prefersHtml(c.req.header("accept"))) return c.html(PAGE);
  return c.json(ROOT_INDEX);
}
