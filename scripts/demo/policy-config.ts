/**
 * The policy switch: the demo compares policies by configuration alone, so each run's
 * configuration is wrangler.toml's development WARMPATH_CONFIG with every region's `policy`
 * replaced. The demo has no routing code of its own.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "smol-toml";
import { ROOT } from "../system.ts";

export const DEMO_POLICIES = ["sticky", "warmpath"] as const;

/**
 * wrangler.toml's development configuration with every region's policy set to `policy`, and, if
 * given, every region's configured `prefill_tokens_per_second` (to run against a rate that is wrong).
 */
export function devConfigWithPolicy(policy: string, prefillTokensPerSecond?: number): Record<string, unknown> {
  const toml = parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as { vars?: { WARMPATH_CONFIG?: unknown } };
  const base = toml.vars?.WARMPATH_CONFIG;
  if (!base || typeof base !== "object") throw new Error("wrangler.toml has no [vars.WARMPATH_CONFIG]");
  const config = structuredClone(base) as { regions: Array<Record<string, unknown>> } & Record<string, unknown>;
  for (const region of config.regions) {
    region.policy = { name: policy };
    if (prefillTokensPerSecond !== undefined) region.prefill_tokens_per_second = prefillTokensPerSecond;
  }
  return config;
}

/** Region names of a configuration, in order. */
export function regionNames(config: Record<string, unknown>): string[] {
  return (config.regions as Array<{ name: string }>).map((r) => r.name);
}
