/**
 * Types for `import { env, exports } from "cloudflare:workers"`: the worker's bindings and its
 * main module's exports (what `wrangler types` would generate, kept by hand since the configuration
 * document is one typed var).
 */
import type { Env as WarmpathEnv } from "./env.ts";

declare global {
  namespace Cloudflare {
    interface Env extends WarmpathEnv {}
    interface GlobalProps {
      mainModule: typeof import("./index.ts");
      durableNamespaces: "RegionDurableObject";
    }
  }
}
