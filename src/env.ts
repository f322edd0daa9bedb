import type { RegionDurableObject } from "../durable-objects/region.ts";

/** Bindings of the worker. Secrets named by the configuration (node tokens, admin token) are looked up by name. */
export interface Env {
  REGION: DurableObjectNamespace<RegionDurableObject>;
  /** The configuration document: a TOML table in wrangler.toml vars, or a JSON string (.dev.vars, secrets). */
  WARMPATH_CONFIG: unknown;
  [binding: string]: unknown;
}
