/**
 * The fault runs' settings (scripts/faults/run.ts): the client load, the answers the fleet streams,
 * where each node fault strikes, and the region the faults strike.
 */

/** Requests a second from each tenant during a scenario (the fleet runs 20x faster than real time). */
export const RATE_PER_TENANT = 4;

/** A client gives up on an answer after this long: past every timeout of the configuration below. */
export const CLIENT_TIMEOUT_MS = 30_000;

/**
 * Tokens a scenario's answer streams: 900 at the fleet's 30 tokens/s x20 take 1.5 s, so a crash or
 * a kill finds several streams in flight (8 requests a second: ~12 at any time).
 */
export const ANSWER_TOKENS = 900;

/** Tokens a node streams before going silent in the hung-after-its-first-byte scenario. */
export const TOKENS_BEFORE_SILENCE = 3;

/** Tokens a node streams before its error event, and before its malformed event (a third and two thirds in). */
export const TOKENS_BEFORE_ERROR_EVENT = 300;
export const TOKENS_BEFORE_MALFORMED_EVENT = 600;

/** How much slower the slow node's prefill is. */
export const PREFILL_SLOWDOWN = 10;

/**
 * The region the clients' requests reach first: a request to workerd-host's socket carries no
 * client location (no `cf` blob), so the edge takes the regions in configuration order, us-east
 * first; eu-west is the failover. The "answered by region" column shows it: under a fault that
 * spares the region, every answer is us-east's.
 */
export const REGION = "us-east";

/** The region clients fail over to when REGION cannot serve. */
export const FAILOVER_REGION = "eu-west";

/** In every URL an internal service's redirect points at: no client-facing answer may contain it. */
export const INTERNAL_MARKER = "internal-only-7d1c";
