/** The policy registry: names as used in configuration, and a factory. */
import {
  ConsistentHashPolicy,
  DynamoKvPolicy,
  LeastLoadedPolicy,
  RandomPolicy,
  RoundRobinPolicy,
  SGLANG_DEFAULTS,
  SglangCacheAwarePolicy,
  StickySessionPolicy,
} from "./baselines.ts";
import { WARMPATH_DEFAULTS, WarmpathPolicy } from "./warmpath.ts";
import type { RoutingPolicy } from "./types.ts";

export const POLICY_NAMES = [
  "warmpath",
  "round-robin",
  "random",
  "least-loaded",
  "sticky",
  "consistent-hash",
  "sglang-cache-aware",
  "dynamo-kv",
] as const;

export type PolicyName = (typeof POLICY_NAMES)[number];

/** Policy selection and parameters, as in a region's configuration. Unset parameters take the policy's defaults. */
export interface PolicySpec {
  name: PolicyName;
  load_factor?: number | undefined;
  tie_tolerance_seconds?: number | undefined;
  kv_pressure_threshold?: number | undefined;
  cache_threshold?: number | undefined;
  balance_abs_threshold?: number | undefined;
  balance_rel_threshold?: number | undefined;
  overlap_weight?: number | undefined;
}

export function createPolicy(spec: PolicySpec): RoutingPolicy {
  switch (spec.name) {
    case "warmpath":
      return new WarmpathPolicy({
        loadFactor: spec.load_factor,
        tieToleranceSeconds: spec.tie_tolerance_seconds ?? WARMPATH_DEFAULTS.tieToleranceSeconds,
        kvPressureThreshold: spec.kv_pressure_threshold ?? WARMPATH_DEFAULTS.kvPressureThreshold,
      });
    case "round-robin":
      return new RoundRobinPolicy();
    case "random":
      return new RandomPolicy();
    case "least-loaded":
      return new LeastLoadedPolicy();
    case "sticky":
      return new StickySessionPolicy();
    case "consistent-hash":
      return new ConsistentHashPolicy(spec.load_factor ?? 1.25);
    case "sglang-cache-aware":
      return new SglangCacheAwarePolicy({
        cacheThreshold: spec.cache_threshold ?? SGLANG_DEFAULTS.cacheThreshold,
        balanceAbsThreshold: spec.balance_abs_threshold ?? SGLANG_DEFAULTS.balanceAbsThreshold,
        balanceRelThreshold: spec.balance_rel_threshold ?? SGLANG_DEFAULTS.balanceRelThreshold,
      });
    case "dynamo-kv":
      return new DynamoKvPolicy(spec.overlap_weight ?? 1);
  }
}

export type { RoutingPolicy, Decision, Candidate, PolicyInput, PolicyChoice } from "./types.ts";
