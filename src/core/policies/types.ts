/**
 * The interface every routing policy implements. A policy only *chooses*: the region router
 * (region/router.ts) gathers the candidates, and applies the choice to the index and the load model,
 * so warmpath's policy and the baselines are compared on exactly the same information.
 */
import type { z } from "zod";
import { decisionSchema, type Decision } from "../../contracts/routing.ts";

export type { Decision } from "../../contracts/routing.ts";

/** Every decision, in the order counters and reports list them. */
export const DECISIONS: readonly Decision[] = decisionSchema.options;

/** One node a request may go to, with everything the router knows about it. */
export interface Candidate {
  id: string;
  /** Believed cached prefix, in blocks. */
  matchBlocks: number;
  /** Believed cached prefix, in tokens (capped at the prompt). */
  matchTokens: number;
  /** Prompt tokens the node would have to prefill. */
  uncachedTokens: number;
  /** Modelled uncached prefill tokens queued ahead (node-load.ts). */
  workAheadTokens: number;
  /** Uncached prefill tokens dispatched to the node lately (decayed over about a minute). */
  recentPrefillTokens: number;
  /** Estimated prefill throughput, tokens/s. */
  prefillRate: number;
  /** Requests this router has in flight on the node. */
  inflight: number;
  /** Prompt tokens of those requests (their KV footprint, Dynamo's "active blocks"). */
  activeTokens: number;
  /** Blocks the index believes the node holds (SGLang's "tree size"). */
  indexBlocks: number;
  /** KV capacity in tokens. */
  kvCapacityTokens: number;
  /** Last reported state, or zeros before the first report. */
  running: number;
  waiting: number;
  kvUsage: number;
}

/** The request as policies see it. */
export interface PolicyRequest {
  hashes: readonly string[];
  promptTokens: number;
  blockTokens: number;
  /** Session/user key (hint for warmpath, the pin for sticky sessions). */
  sessionKey: string | undefined;
  /** Node this session last went to, if still a candidate. */
  sessionNode: string | undefined;
}

export interface PolicyInput {
  /** Eligible nodes, in a stable order (by id). Never empty. */
  candidates: readonly Candidate[];
  request: PolicyRequest;
  /** Uniform [0, 1) from the router's seeded generator. */
  random: () => number;
}

export interface PolicyChoice {
  /** Index into `candidates`. */
  index: number;
  decision: Decision;
}

export interface RoutingPolicy {
  readonly name: string;
  choose(input: PolicyInput): PolicyChoice;
}

/**
 * A policy as the registry (index.ts) knows it: its strict options schema (`name` as a literal,
 * then its own options with their defaults) and a factory taking the parsed options. A policy's
 * options and their defaults live only in its schema.
 */
export interface PolicyDefinition<Options extends { name: string }> {
  readonly options: z.ZodType<Options>;
  create(options: Options): RoutingPolicy;
}
