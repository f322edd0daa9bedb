/**
 * The policy registry: every policy by its configuration name, the contract of a policy's
 * configuration (`policySpecSchema`: a union of each policy's own strict options schema, so an
 * option of another policy, or a misspelt one, is refused by name), and the factory.
 *
 * Besides warmpath's own policy, the baselines users compare it against, on the same interfaces
 * and information; each follows its anchor's source and defaults, cited at the top of its file.
 */
import { z } from "zod";
import { consistentHash, consistentHashOptionsSchema } from "./consistent-hash.ts";
import { dynamoKv, dynamoKvOptionsSchema } from "./dynamo-kv.ts";
import { leastLoaded, leastLoadedOptionsSchema } from "./least-loaded.ts";
import { randomOptionsSchema, randomPolicy } from "./random.ts";
import { roundRobin, roundRobinOptionsSchema } from "./round-robin.ts";
import { sglangCacheAware, sglangCacheAwareOptionsSchema } from "./sglang-cache-aware.ts";
import { sglangSmallestTree, sglangSmallestTreeOptionsSchema } from "./sglang-smallest-tree.ts";
import { sticky, stickyOptionsSchema } from "./sticky.ts";
import { warmpath, warmpathOptionsSchema } from "./warmpath.ts";
import type { PolicyDefinition, RoutingPolicy } from "./types.ts";

/** A policy and its options, as in a region's configuration (`policy = { name = "...", ... }`). */
export const policySpecSchema = z.discriminatedUnion("name", [
  warmpathOptionsSchema,
  roundRobinOptionsSchema,
  randomOptionsSchema,
  leastLoadedOptionsSchema,
  stickyOptionsSchema,
  consistentHashOptionsSchema,
  sglangCacheAwareOptionsSchema,
  sglangSmallestTreeOptionsSchema,
  dynamoKvOptionsSchema,
]);

/** A parsed policy spec: the policy's options with their defaults filled in. */
export type PolicySpec = z.output<typeof policySpecSchema>;

/** A policy spec as written: options may be left out for their defaults. */
export type PolicySpecInput = z.input<typeof policySpecSchema>;

export type PolicyName = PolicySpec["name"];

/** Each name's definition; the mapped type checks that a definition's schema is the one for its name. */
const DEFINITIONS: { [N in PolicyName]: PolicyDefinition<Extract<PolicySpec, { name: N }>> } = {
  warmpath,
  "round-robin": roundRobin,
  random: randomPolicy,
  "least-loaded": leastLoaded,
  sticky,
  "consistent-hash": consistentHash,
  "sglang-cache-aware": sglangCacheAware,
  "sglang-smallest-tree": sglangSmallestTree,
  "dynamo-kv": dynamoKv,
};

/** Every policy name, warmpath first. */
export const POLICY_NAMES = Object.keys(DEFINITIONS) as [PolicyName, ...PolicyName[]];

/** Parses a policy spec (filling its defaults); throws a ZodError naming any bad or unknown option. */
export function parsePolicySpec(input: unknown): PolicySpec {
  return policySpecSchema.parse(input);
}

export function createPolicy(spec: PolicySpec): RoutingPolicy {
  // The name selects the definition whose options `spec` was parsed by.
  const definition = DEFINITIONS[spec.name] as PolicyDefinition<PolicySpec>;
  return definition.create(spec);
}

export type { RoutingPolicy, Decision, Candidate, PolicyInput, PolicyChoice, PolicyDefinition } from "./types.ts";
