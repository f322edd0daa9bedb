/**
 * The local single-process composition (wrangler.toml's top level: the test suite, `wrangler
 * types`, a quick `wrangler dev`): the edge worker as the default export, the region worker as the
 * named entrypoint `RegionWorker` that the edge's `REGION_WORKER_*` bindings reach, and the region
 * Durable Object. Every request still crosses a real service binding from the edge to the region
 * service, with the same messages as deployed; only the process is shared. Deployed, and under
 * `npm start`, the edge (src/edge/index.ts) and each region's worker (src/region/index.ts) are
 * separate workers (scripts/deploy.ts).
 */
import { WorkerEntrypoint } from "cloudflare:workers";
import edge from "./edge/index.ts";
import region from "./region/index.ts";

export default edge;

/** The region service behind the edge's bindings (REGION_ENTRYPOINT, src/contracts/topology.ts). */
export class RegionWorker extends WorkerEntrypoint<Env> {
  override fetch(request: Request): Promise<Response> {
    return Promise.resolve(region.fetch(request as Request<unknown, IncomingRequestCfProperties>, this.env, this.ctx));
  }
}

export { RegionDurableObject } from "../durable-objects/region.ts";
