/**
 * The interface every routing policy implements. A policy only *chooses*: the region router
 * (region/placement.ts) gathers the candidates, and applies the choice to the index and the load model,
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
  /** Modelled uncached prefill tokens queued ahead (node-load.ts), or the wait for a place in tokens at its rate when longer. */
  workAheadTokens: number;
  /** The wait for a place among the node's running requests, ms (node-load.ts slotWaitMs); absent or 0: none. */
  slotWaitMs?: number | undefined;
  /** Uncached prefill tokens dispatched to the node lately (decayed over about a minute). */
  recentPrefillTokens: number;
  /** Estimated prefill throughput, tokens/s. */
  prefillRate: number;
  /** Requests this router has in flight on the node. */
  inflight: number;
  /** Requests this router has sent the node since it joined (SGLang's "processed requests"). */
  dispatched: number;
  /** When this router last sent the node a request (ms; -Infinity if never). */
  lastDispatchAt: number;
  /** Prompt tokens of those requests (their KV footprint, counted once per request). */
  activeTokens: number;
  /**
   * Uncached prompt tokens of the requests sent and not yet answered with a first byte, with no
   * credit for progress (Dynamo's "active prefill tokens").
   */
  queuedPrefillTokens: number;
  /**
   * Distinct blocks (in base blocks) of the prompts in flight on the node, a block shared by several
   * counted once (Dynamo's deduplicated "active blocks"). 0 unless the policy asks for them.
   */
  activeBlocks: number;
  /** This request's leading blocks (in base blocks) already among the node's active blocks. 0 unless asked for. */
  activeMatchBlocks: number;
  /** Base blocks the index believes the node holds (SGLang's "tree size"). */
  indexBlocks: number;
  /** KV capacity in tokens. */
  kvCapacityTokens: number;
  /** Last reported state, or zeros before the first report. */
  running: number;
  waiting: number;
  kvUsage: number;
}

/** The request as policies see it. */
interface PolicyRequest {
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
  /** The policy reads activeBlocks / activeMatchBlocks, which the router then tracks (a cost per request). Default false. */
  readonly tracksActiveBlocks?: boolean;
  /**
   * How many tokens the router's prefix index may believe a node holds, given its KV capacity.
   * Default: the KV capacity, so the index forgets what the node must have evicted. A baseline
   * whose own index is bounded otherwise (SGLang's tree, by characters) says so here.
   */
  indexCapacityTokens?(kvCapacityTokens: number): number;
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
