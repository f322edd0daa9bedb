/**
 * The edge's `routes` and every worker's `limits`, as written in a wrangler.toml environment and
 * carried by the generator (./generate.ts): checked here so a mistake is named before anything is
 * uploaded, in the shapes wrangler takes.
 *
 * Routes (https://developers.cloudflare.com/workers/configuration/routing/): a custom domain
 * `{ pattern = "api.example.com", custom_domain = true }` (the Worker is the origin; Cloudflare
 * creates the DNS record and certificate), a zone route `{ pattern = "example.com/v1/*",
 * zone_name = "example.com" }` (or `zone_id`), or a bare pattern string. A custom domain is a host
 * name: no wildcard, no path (custom-domains page).
 */
import type { Findings } from "./checks.ts";

export type Route = string | { pattern: string; custom_domain?: boolean; zone_name?: string; zone_id?: string };

/** Longest CPU time per invocation on Workers Paid, 5 minutes (https://developers.cloudflare.com/workers/platform/limits/, "CPU time"). */
export const MAX_CPU_MS = 300_000;

const ROUTE_KEYS = new Set(["pattern", "custom_domain", "zone_name", "zone_id"]);
const HOST = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$/i;

export function checkRoutes(routes: unknown): Findings {
  const problems: string[] = [];
  if (routes === undefined) return { problems, warnings: [] };
  if (!Array.isArray(routes))
    return { problems: ["routes: must be a list (routes = [{ pattern = ..., custom_domain = true }])"], warnings: [] };
  routes.forEach((r: unknown, i) => {
    if (typeof r === "string") {
      if (!r.includes("/"))
        problems.push(`routes.${i}: "${r}" is a host name: for a custom domain write { pattern = "${r}", custom_domain = true }`);
      return;
    }
    if (r === null || typeof r !== "object" || typeof (r as { pattern?: unknown }).pattern !== "string") {
      problems.push(`routes.${i}: must be a pattern string or { pattern, custom_domain | zone_name | zone_id }`);
      return;
    }
    const unknown = Object.keys(r).filter((k) => !ROUTE_KEYS.has(k));
    if (unknown.length) problems.push(`routes.${i}: unknown key ${unknown.join(", ")}`);
    const route = r as Exclude<Route, string>;
    if (route.custom_domain === true) {
      if (!HOST.test(route.pattern))
        problems.push(`routes.${i}.pattern: a custom domain is a host name, without wildcard, scheme or path ("${route.pattern}")`);
    } else if (route.zone_name === undefined && route.zone_id === undefined) {
      problems.push(`routes.${i}: a zone route names its zone (zone_name or zone_id), or is a custom domain (custom_domain = true)`);
    }
  });
  return { problems, warnings: [] };
}

export function checkLimits(limits: unknown): Findings {
  if (limits === undefined) return { problems: [], warnings: [] };
  const problems: string[] = [];
  if (limits === null || typeof limits !== "object") return { problems: ["limits: must be a table ({ cpu_ms = 30000 })"], warnings: [] };
  for (const [k, v] of Object.entries(limits)) {
    if (k === "cpu_ms") {
      if (!Number.isInteger(v) || (v as number) < 1 || (v as number) > MAX_CPU_MS)
        problems.push(`limits.cpu_ms: an integer from 1 to ${MAX_CPU_MS} (5 minutes), not ${JSON.stringify(v)}`);
    } else if (k === "subrequests") {
      if (!Number.isInteger(v) || (v as number) < 1) problems.push(`limits.subrequests: a positive integer, not ${JSON.stringify(v)}`);
    } else problems.push(`limits.${k}: unknown (cpu_ms, subrequests)`);
  }
  return { problems, warnings: [] };
}
