import type { LoadedConfig } from "./config/load.ts";
import type { TenantConfig } from "./config/schema.ts";
import type { Env } from "./env.ts";

/** Hono context typing shared by the routers. */
export interface AppEnv {
  Bindings: Env;
  Variables: {
    requestId: string;
    config: LoadedConfig;
    tenant: TenantConfig;
  };
}
