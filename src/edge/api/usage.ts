/**
 * GET /admin/usage (docs/USAGE.md): the usage ledger, per tenant, UTC day, model and region, from
 * every region's objects. Admin token, as the rest of /admin. Query: `tenant` (default every
 * tenant), `from` and `to` (UTC days, inclusive; default the current month up to today). JSON
 * `{"data": [...]}`, or CSV with `Accept: text/csv` (or `?format=csv`). A region that cannot be
 * reached fails the export (503): a bill missing a region must not look whole. At most
 * MAX_USAGE_EXPORT_ROWS rows (50,000): past it, 400 `usage_export_too_large`, which says to ask
 * for fewer days or one tenant.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-types.ts";
import { regionPath } from "../../contracts/region-service.ts";
import { MAX_USAGE_EXPORT_ROWS, usageAnswerSchema, type UsageRow } from "../../contracts/usage.ts";
import { isCalendarDay, utcDay } from "../../core/usage/periods.ts";
import { gatherBounded, mergeUsageRows, roundUsd, usageCsv } from "../../core/usage/rows.ts";
import { ApiError } from "../../http/errors.ts";
import { regionAnswer } from "../region-client.ts";

/** The longest range one export may ask for: the longest retention (src/config/usage-schema.ts). */
const MAX_RANGE_DAYS = 3_660;

const dayParam = (param: string) =>
  z
    .string()
    .refine(isCalendarDay, { message: `${param} must be a UTC day, YYYY-MM-DD` })
    .optional();

const querySchema = z.strictObject({
  tenant: z.string().min(1).max(64).optional(),
  from: dayParam("from"),
  to: dayParam("to"),
  format: z.enum(["json", "csv"]).optional(),
});

/** A query parameter name `param` may name: short and plain, so an error holds nothing the client chose beyond it. */
const PLAIN_PARAMETER = /^[A-Za-z][A-Za-z0-9_-]{0,31}$/;

/**
 * 400 for a query parameter the export does not take. The message is fixed (it names the
 * parameters that work, never the one sent: errors do not repeat what the client sent); `param`
 * names it only when it is a short, plain name (a typo such as `tenat`), else null.
 */
function unknownParameter(name: string | undefined): ApiError {
  const param = name !== undefined && PLAIN_PARAMETER.test(name) ? name : null;
  return ApiError.invalidRequest("Unknown query parameter: use tenant, from, to, format", param, "invalid_usage_query");
}

/** 400 for an export past {@link MAX_USAGE_EXPORT_ROWS}: what to ask instead (fewer days, or one tenant). */
function exportTooLarge(oneTenant: boolean): ApiError {
  const narrower = oneTenant ? "fewer days (from, to)" : "fewer days (from, to) or one tenant (tenant)";
  return ApiError.invalidRequest(
    `The export holds more than ${MAX_USAGE_EXPORT_ROWS.toLocaleString("en-US")} rows: ask for ${narrower}`,
    "from",
    "usage_export_too_large",
  );
}

export const usageApi = new Hono<AppEnv>();

usageApi.get("/admin/usage", async (c) => {
  const parsed = querySchema.safeParse(c.req.query());
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    if (issue.code === "unrecognized_keys") throw unknownParameter(issue.keys[0]);
    throw ApiError.invalidRequest(issue.message, String(issue.path[0] ?? ""), "invalid_usage_query");
  }
  const today = utcDay(Date.now());
  const from = parsed.data.from ?? `${today.slice(0, 7)}-01`;
  const to = parsed.data.to ?? today;
  if (from > to) throw ApiError.invalidRequest(`from (${from}) is after to (${to})`, "from", "invalid_usage_query");
  if ((Date.parse(to) - Date.parse(from)) / 86_400_000 >= MAX_RANGE_DAYS)
    throw ApiError.invalidRequest(`Ask for at most ${MAX_RANGE_DAYS} days at once`, "from", "invalid_usage_query");

  const search = new URLSearchParams({ from, to });
  if (parsed.data.tenant !== undefined) search.set("tenant", parsed.data.tenant);
  const config = c.get("config");
  // One region after another, each asked for what the others left of the bound (gatherBounded).
  const rows = await gatherBounded(MAX_USAGE_EXPORT_ROWS, (k, left) => {
    const r = config.regions[k];
    if (!r) return undefined;
    search.set("limit", String(left));
    return regionAnswer(c.env, r, `${regionPath.usage(r.config.name)}?${search}`, usageAnswerSchema);
  });
  if (!rows) throw exportTooLarge(parsed.data.tenant !== undefined);
  const data: UsageRow[] = mergeUsageRows(rows).map((r) => ({
    ...r,
    cost_usd: roundUsd(r.cost_usd),
    estimated_cost_usd: roundUsd(r.estimated_cost_usd),
  }));
  const csv = parsed.data.format === "csv" || (parsed.data.format === undefined && (c.req.header("accept") ?? "").includes("text/csv"));
  if (csv) {
    return c.body(usageCsv(data), 200, {
      "content-type": "text/csv; charset=utf-8",
      "content-disposition": `attachment; filename="warmpath-usage-${from}-${to}.csv"`,
    });
  }
  return c.json({ from, to, data });
});
