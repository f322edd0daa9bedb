/**
 * The edge worker: the client, node and admin APIs at the Cloudflare location nearest the caller.
 * It forwards each request once, over a service binding, to the chosen region's worker
 * (src/region/index.ts), and passes its answer back.
 */
import { createApp } from "./app.ts";

const app = createApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
} satisfies ExportedHandler<Env>;
