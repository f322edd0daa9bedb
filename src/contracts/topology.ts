/**
 * The deployed topology, named once: which workers exist, what they are called and how the edge
 * reaches each region's worker. Used by the edge (to find a region's service binding), the region
 * worker (to know which region it serves), the deploy generator (scripts/deploy.ts) and the local
 * system (scripts/system.ts), so the four cannot drift.
 *
 *     client -> edge worker (nearest Cloudflare location)
 *                 -- service binding REGION_WORKER_<REGION> -->
 *               region worker `<edge name>-region-<region>` (placed by the region's GPUs)
 *                 -- RPC (one session per request) --> region Durable Object(s)
 *                 -- fetch --> GPU node
 */

/** The edge's binding to a region's worker: `REGION_WORKER_US_EAST` for region `us-east`. */
export function regionBindingName(region: string): string {
  return `REGION_WORKER_${region.toUpperCase().replace(/-/g, "_")}`;
}

/**
 * The local composition's one binding to a region service serving every region (src/index.ts):
 * used for a region without a binding of its own, so the test configurations' many regions need
 * no binding each. A deployed edge has one binding per region and no such binding.
 */
export const ALL_REGIONS_BINDING = "REGION_WORKERS";

/** A region worker's script name: `warmpath-region-us-east` for edge `warmpath`, region `us-east`. */
export function regionWorkerName(edgeName: string, region: string): string {
  return `${edgeName}-region-${region}`;
}

/**
 * Every region worker's binding to the budget ledger's home (docs/USAGE.md): the worker of the
 * region named by `budget_ledger_region` (default the first region; src/config/ledger-home.ts),
 * whose Durable Object namespace holds the one budget ledger object. Each
 * region worker's script has a namespace of its own, so an object named the same in two regions'
 * namespaces is two objects: the other regions reach the ledger through this service binding. The
 * home region's worker, and the local single-process composition, call it in their own namespace.
 */
export const BUDGET_LEDGER_BINDING = "BUDGET_LEDGER";

/** Cloudflare's longest Worker name. */
export const MAX_WORKER_NAME_LENGTH = 63;

/**
 * The variable that makes a worker a region's worker, naming its region. Unset (the local
 * single-process composition, src/index.ts), the region service serves every configured region.
 */
export const REGION_VAR = "WARMPATH_REGION";

/**
 * The named entrypoint of the local single-process composition (src/index.ts) that the edge's
 * bindings reach there: the region worker's handler, behind a real service binding.
 */
export const REGION_ENTRYPOINT = "RegionWorker";

/**
 * The local host's asset worker, bound to the edge under `npm start` (scripts/workerd-host.ts);
 * never declared in a deployed configuration, where Cloudflare serves the files before the worker
 * (src/edge/api/local-assets.ts).
 */
export const LOCAL_ASSETS_BINDING = "LOCAL_ASSETS";

/**
 * The version metadata binding (Cloudflare's `version_metadata`: the worker version's id, tag and
 * upload time), declared on every generated region worker (scripts/deploy/generate.ts): the upload
 * time orders the region inits two versions send during a gradual deployment
 * (durable-objects/init-order.ts). Absent (the local composition), inits are unordered.
 */
export const VERSION_METADATA_BINDING = "CF_VERSION_METADATA";
