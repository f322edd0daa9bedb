/**
 * The dashboard's files (public/dashboard/) where the runtime does not serve them before the
 * worker. On Cloudflare it does: `[assets]` in wrangler.toml, with the API's paths in
 * `run_worker_first`, so these paths never reach the edge (a missing file does, and gets the
 * edge's 404). Locally, Miniflare would put its asset router and an RPC proxy, two more workers,
 * in front of every request to a worker with assets, the API's included: 1.0-2.0 ms more CPU a
 * request in `npm start`'s topology (two paired runs on the 2-core machine), which Cloudflare does
 * not spend. So the local host (scripts/workerd-host.ts) serves the files from an asset worker of
 * its own, bound to the edge as `LOCAL_ASSETS` (src/contracts/topology.ts), and the edge passes the
 * dashboard's paths to it. Deployed, the binding does not exist and the route answers the 404.
 */
import type { Context } from "hono";
import type { AppEnv } from "../app-types.ts";
import { LOCAL_ASSETS_BINDING } from "../../contracts/topology.ts";
import { ApiError } from "../../http/errors.ts";
import { DASHBOARD_PATH } from "./root.ts";

/** The paths the asset worker answers: the dashboard's folder, and its name without the slash (redirected to it). */
export const LOCAL_ASSET_PATHS = [DASHBOARD_PATH.slice(0, -1), `${DASHBOARD_PATH}*`];

/** A file from the local asset worker; a path that names none gets the edge's 404, as deployed. */
export async function localAssets(c: Context<AppEnv>): Promise<Response> {
  const assets = (c.env as unknown as Record<string, Fetcher | undefined>)[LOCAL_ASSETS_BINDING];
  const file = assets && (await assets.fetch(c.req.raw));
  if (file && file.status !== 404) return file;
  await file?.body?.cancel();
  // Not the app's notFound: these paths have GET routes (this one), which it would answer 405.
  throw ApiError.notFound("route_not_found", `No file for ${c.req.method} on this path`);
}
