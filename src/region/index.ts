/**
 * The region worker: one per GPU region, placed by the region's GPUs, reached by the edge over a
 * service binding (src/region/app.ts). It owns its region's Durable Object class.
 */
import { createRegionApp } from "./app.ts";

const app = createRegionApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
} satisfies ExportedHandler<Env>;

export { RegionDurableObject } from "../../durable-objects/region.ts";
