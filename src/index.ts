/**
 * warmpath: a cache-aware edge router for LLM inference fleets.
 * This file only composes: the Hono app, and the region Durable Object class.
 */
import { createApp } from "./app.ts";

const app = createApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
} satisfies ExportedHandler<Env>;

export { RegionDurableObject } from "../durable-objects/region.ts";
