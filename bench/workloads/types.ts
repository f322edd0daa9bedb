/** What a workload hands the simulator: requests with both the router's and the fleet's view. */
export interface BenchRequest {
  id: number;
  /** Arrival at speed x1, ms from the start of the workload. */
  arrival: number;
  /** The user, when the workload has one (sticky sessions and warmpath's session hint use it). */
  sessionKey: string | undefined;
  /** What the router sees: chained hashes of the canonical prompt text (src/core/prefix.ts). */
  hashes: string[];
  /** Prompt tokens (the router's estimate, which by construction of the text is also the truth). */
  promptTokens: number;
  /** What the fleet caches: the prompt's blocks at the engine's granularity, as chained ids. */
  trueBlocks: number[];
  outputTokens: number;
  /** The tenant, when the workload has several (the multi-tenant mix of bench/goodput.ts). */
  tenant?: string;
  /** Its priority class (the multi-tenant mix); undefined: standard. */
  priority?: "interactive" | "standard" | "batch";
  /** Its tenant's time-to-first-token objective (ms), when configured; undefined: the default formula (fleet.ts objectiveMs). */
  objectiveMs?: number;
}

export interface Workload {
  name: string;
  /** One line for the report. */
  description: string;
  /** Tokens per entry of `trueBlocks` (the engine's block size for this workload). */
  trueBlockTokens: number;
  requests: BenchRequest[];
}
