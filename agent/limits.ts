/**
 * The node report contract's bounds (src/contracts/node.ts nodeReportSchema), repeated here because
 * the agent imports only types from the router: it ships alone to GPU hosts, and a value imported
 * from src/contracts would bundle zod and the router's code into it (scripts/build-agent.ts refuses
 * that). agent/test/agent-limits.test.ts checks each against the contract. A report past one of
 * them is refused whole (400), so the agent clamps what it reads from the engine and refuses, at
 * startup, a flag that could never be sent.
 */

/** `running` and `waiting`: the contract's MAX_REPORTED_REQUESTS. Larger engine figures are clamped to it. */
export const MAX_REPORTED_REQUESTS = 1_000_000;

/** `max_running_requests` (nodeMaxRunningSchema). */
export const MAX_RUNNING_REPORTED = 65_536;

/** `models` (nodeModelsSchema): at most this many names, each 1..MAX_MODEL_NAME characters. */
export const MAX_MODELS = 64;
export const MAX_MODEL_NAME = 256;

/** `region`: 1..64 characters. */
export const MAX_REGION = 64;

/** `url` (nodeUrlSchema): at most 2048 characters. */
export const MAX_NODE_URL = 2048;

/** `node_id` (NODE_ID_PATTERN). */
export const NODE_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

/**
 * The longest delay a Node timer takes: past it (2^31-1 ms, about 24.8 days) setTimeout fires
 * after 1 ms instead (TimeoutOverflowWarning), so every wait and duration flag stays within it.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;
