/**
 * The policy switch: the demo compares policies by configuration alone, so each run's
 * configuration is wrangler.toml's development WARMPATH_CONFIG with every region's `policy`
 * replaced. The demo has no routing code of its own.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "smol-toml";
import { configSchema } from "../../src/config/schema.ts";
import { ROOT } from "../system.ts";

export const DEMO_POLICIES = ["sticky", "warmpath"] as const;

/**
 * The time factor the router's wall-clock settings are taken as given at: the demo's default,
 * at which docs/demo.md's figures were measured. The router reads an objective or a wait in wall
 * milliseconds, while the fleet runs `timeFactor` times faster than model time, so the same 1 s
 * objective is 5 s of model time at x5 and 2 s at x2: without scaling, `--time-factor 2` ran a
 * stricter router (more requests shed, 429, and timed out) than the default, and its table was not
 * the same experiment slowed down.
 */
export const REFERENCE_TIME_FACTOR = 5;

/**
 * The router's settings that are durations of the fleet's work, scaled so that at any time factor
 * they are the same model time as at REFERENCE_TIME_FACTOR: the admission objective's floor and
 * the dispatch bound, the fair share's and saturation's waits, and the shortest first-byte wait.
 * (Settings about the router's own machinery, node silence or cool-downs, are not the fleet's and
 * are left as they are; so are the admission's fixed 10 s demand windows, which are not
 * configurable.) Returns `config` with those fields set.
 */
export function scaleTimesToFactor(config: Record<string, unknown>, timeFactor: number): Record<string, unknown> {
  const scale = REFERENCE_TIME_FACTOR / timeFactor;
  if (scale === 1) return config;
  const effective = configSchema.parse(config);
  const out = structuredClone(config) as { regions: Array<Record<string, unknown>>; limits?: Record<string, unknown> };
  effective.regions.forEach((r, i) => {
    const region = out.regions[i]!;
    region.admission = {
      ...(region.admission as Record<string, unknown> | undefined),
      objective_min_ms: Math.max(1, Math.round(r.admission.objective_min_ms * scale)),
      dispatch_wait_ms: r.admission.dispatch_wait_ms * scale,
    };
    region.fair_share_wait_seconds = r.fair_share_wait_seconds * scale;
    region.max_queue_seconds = r.max_queue_seconds * scale;
  });
  out.limits = {
    ...out.limits,
    // Never past the timeout it is the floor of (the configuration refuses that): a demo run slower
    // than real time waits at most the whole first-byte timeout.
    first_byte_timeout_floor_ms: Math.min(
      effective.limits.first_byte_timeout_ms,
      Math.max(1, Math.round(effective.limits.first_byte_timeout_floor_ms * scale)),
    ),
  };
  return out;
}

/**
 * wrangler.toml's development configuration with every region's policy set to `policy`, and, if
 * given, every region's configured `prefill_tokens_per_second` (to run against a rate that is wrong)
 * and its durations scaled to the time factor (scaleTimesToFactor).
 */
export function devConfigWithPolicy(policy: string, prefillTokensPerSecond?: number, timeFactor?: number): Record<string, unknown> {
  const toml = parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as { vars?: { WARMPATH_CONFIG?: unknown } };
  const base = toml.vars?.WARMPATH_CONFIG;
  if (!base || typeof base !== "object") throw new Error("wrangler.toml has no [vars.WARMPATH_CONFIG]");
  const config = structuredClone(base) as { regions: Array<Record<string, unknown>> } & Record<string, unknown>;
  for (const region of config.regions) {
    region.policy = { name: policy };
    if (prefillTokensPerSecond !== undefined) region.prefill_tokens_per_second = prefillTokensPerSecond;
  }
  return timeFactor === undefined ? config : scaleTimesToFactor(config, timeFactor);
}

/** Region names of a configuration, in order. */
export function regionNames(config: Record<string, unknown>): string[] {
  return (config.regions as Array<{ name: string }>).map((r) => r.name);
}
