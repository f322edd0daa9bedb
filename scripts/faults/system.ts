/** The system the fault scenarios run against: the router's configuration and the fleet, at x20. */
import { join } from "node:path";
import { loadFleet, type FleetConfig } from "../../fleet/config.ts";
import { devConfigWithPolicy } from "../demo/policy-config.ts";
import { ROOT, startSystem, type System } from "../system.ts";
import { keepRouterLine } from "./router-log.ts";
import { ANSWER_TOKENS } from "./settings.ts";

/** The router with short waits, so a hung node is given up on within the scenario. */
export function faultConfig(fairShareWaitSeconds?: number): Record<string, unknown> {
  const base = devConfigWithPolicy("warmpath") as { regions: Array<Record<string, unknown>> } & Record<string, unknown>;
  if (fairShareWaitSeconds !== undefined) for (const r of base.regions) r.fair_share_wait_seconds = fairShareWaitSeconds;
  return {
    ...base,
    limits: { first_byte_timeout_floor_ms: 2_000, first_byte_timeout_ms: 10_000, stream_idle_timeout_ms: 3_000 },
  };
}

/** The default fleet, its answers allowed ANSWER_TOKENS long (its cap, 64 tokens, would end them in ~0.1 s). */
export function faultFleet(): FleetConfig {
  const fleet = loadFleet(join(ROOT, "fleet", "fleet.default.json"));
  for (const r of fleet.regions) for (const n of r.nodes) n.default_max_tokens = Math.max(n.default_max_tokens, ANSWER_TOKENS);
  return fleet;
}

/**
 * The system the scenarios run against: the edge and each region's worker in a workerd process of
 * its own (so one region's worker can be killed alone) with faultConfig, the fault fleet at x20.
 */
export function startFaultSystem(fairShareWaitSeconds?: number): Promise<System> {
  return startSystem({
    port: 0,
    runtime: "workerd",
    timeFactorScale: 20,
    config: faultConfig(fairShareWaitSeconds),
    fleetConfig: faultFleet(),
    onRouterOutput: keepRouterLine,
  });
}
