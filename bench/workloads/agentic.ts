/**
 * A seeded generator of agentic coding sessions: the long-context regime, where one session's
 * context grows past 100k tokens and a node's KV cache holds only a few such contexts.
 *
 * Model (every knob is a field of {@link AgenticConfig}; the defaults are {@link AGENTIC}):
 * - Sessions start as a Poisson process (`sessionsPerSecond`) within [0, `durationSeconds`); turns
 *   that would arrive later are dropped, as in generator.ts. A session belongs to a tenant (Zipf
 *   popularity `tenantZipf` over `tenants`), so several sessions of a tenant run at once. The
 *   session id is the request's sessionKey, as `prompt_cache_key` or `x-session-id` would carry
 *   it, and each tenant hashes in its own namespace.
 * - Every tenant has one preamble of `preambleTokens`, shared by all its sessions: tool definitions
 *   (`toolsPerTenant` tools, `toolDefinitionShare` of the preamble) in the request's `tools`,
 *   then the system instructions. That is the order chat templates render them in and the order
 *   Anthropic's prompt caching caches them in (tools, system, messages).
 * - A session is `turns` requests. The first prompt is the preamble and the user's task
 *   (`taskTokens`). Each answer is either tool calls (1, 2 or 3 calls in one assistant message,
 *   with probabilities `toolCallsPerTurn`, as with OpenAI's `parallel_tool_calls`), and the next
 *   request appends that assistant message and one `role: "tool"` message per call, each a tool
 *   output (file contents, command output, code) of `toolOutputTokens`; or, with probability
 *   `humanTurnProbability`, a message to the human, and the next request appends it and the
 *   human's reply (`userMessageTokens`). The context is append-only (the cache-friendly agent
 *   design Manus describes in "Context Engineering for AI Agents", 2025), so every request's
 *   prompt is the previous request's prompt plus its answer plus the new part.
 * - Answers are `outputTokens` long, short next to the context: Manus reports an average
 *   input-to-output token ratio of about 100:1 for its agent.
 * - Open loop: request k+1 arrives a pause after request k. The pause is the time to stream the
 *   answer at `answerTokensPerSecond`, then the tool's run time (`toolSeconds`, lognormal) or the
 *   human's review and reply (`humanSeconds`, lognormal), so pauses range from about a second to
 *   several minutes.
 * - A session ends after its `turns`, or earlier when its next prompt would pass
 *   `maxContextTokens`: near the model's window an agent compacts its context (Claude Code
 *   summarises the conversation near its 200k-token default window), which breaks the prefix, so
 *   what follows would be a new session.
 *
 * Sizes are log-uniform over their ranges (each factor of two as likely as any other): a few
 * large tool outputs or sessions dominate the totals, as long file reads do against short command
 * outputs. The ranges are chosen, not measured from a trace: chosen so that the long sessions
 * reach 100k+ tokens. What the defaults give, measured: about 3,000 requests from 138 sessions;
 * prompts of 57k tokens on average (median 48k, p99 177k); 14% of requests at 100k tokens or
 * more (a third of all prompt tokens), reached by 29% of the sessions; answers of 430 tokens on
 * average (about 130:1 input to output); pauses of 14 s median, 23 s mean, 2.7 min p99. Once the
 * load is steady, some 30 sessions run at once (26 to 42 measured) and hold 1.5M-2.3M tokens of
 * context: about half of the fleet's 4M tokens of cache, while one 500k-token node holds only a
 * few of them.
 *
 * Router view: the prompt is an OpenAI-style request (tools, system, user, assistant tool calls,
 * tool results), canonicalised and hashed by the production `prefixKey` in the tenant's
 * namespace. Fleet view: the engine caches the same canonical text in 64-token blocks
 * (generator.ts's `engineBlocks`).
 *
 * Entity texts: bench/text.ts has no kinds for tool definitions or tool outputs, so this workload
 * uses existing kinds with ids from {@link ID_BASE} (2^30) up, a range no other workload reaches
 * (generator.ts's ids are tenant, document and session x 64 + turn numbers far below it).
 * Within a kind, entityText's ids below 2^32 map to distinct texts, so every entity here is
 * distinct: KIND.system for a tenant's instructions and tool descriptions, KIND.userTurn for the
 * user's messages, KIND.answer for the assistant's messages and tool-call arguments, and
 * KIND.document for tool outputs.
 */
import { prefixKey, DEFAULT_PREFIX_SETTINGS } from "../../src/core/prefix.ts";
import { canonicalText, type CanonicalMessage, type CanonicalPrompt } from "../../src/core/canonical.ts";
import { seededRandom, zipfSampler } from "../../src/core/random.ts";
import { entityText, KIND } from "../text.ts";
import { engineBlocks } from "./generator.ts";
import type { BenchRequest, Workload } from "./types.ts";

/** A lognormal distribution by its median and the sigma of its logarithm. */
export interface LogNormal {
  median: number;
  sigma: number;
}

export interface AgenticConfig {
  name: string;
  /** One line for the report. */
  description: string;
  seed: number;
  /** Sessions start within [0, durationSeconds); turns that would arrive later are dropped. */
  durationSeconds: number;
  /** Poisson rate of session starts. */
  sessionsPerSecond: number;
  tenants: number;
  /** Zipf exponent of tenant popularity (0: uniform). */
  tenantZipf: number;
  /** Tokens of a tenant's preamble (tool definitions + system instructions), uniform per tenant. */
  preambleTokens: [number, number];
  /** Share of the preamble that is tool definitions; the rest is system instructions. */
  toolDefinitionShare: number;
  /** Tools defined per tenant, uniform (at most 63). */
  toolsPerTenant: [number, number];
  /** Requests per session, log-uniform (at most 64). */
  turns: [number, number];
  /** The user's task, the session's first message, log-uniform tokens. */
  taskTokens: [number, number];
  /** Probability of 1, 2, ... tool calls in one assistant message (at most 4 entries). */
  toolCallsPerTurn: number[];
  /** Each tool output, log-uniform tokens. */
  toolOutputTokens: [number, number];
  /** Probability that an answer goes to the human rather than to tools. */
  humanTurnProbability: number;
  /** The human's reply, log-uniform tokens. */
  userMessageTokens: [number, number];
  /** Each answer (tool calls or a message), log-uniform tokens. */
  outputTokens: [number, number];
  /** Rate at which the client receives an answer before it can act on it. */
  answerTokensPerSecond: number;
  /** A tool's run time after the answer, seconds. */
  toolSeconds: LogNormal;
  /** The human's review and reply after the answer, seconds. */
  humanSeconds: LogNormal;
  /** A session ends before a prompt would pass this many tokens. */
  maxContextTokens: number;
}

export const AGENTIC: AgenticConfig = {
  name: "agentic",
  description: "agentic coding sessions (6 tenants, 6k-20k-token tool preambles, 10-60 turns, contexts growing to 100k-200k tokens)",
  seed: 13,
  // Sessions last about nine minutes on average (a tenth of them over 18), so the load ramps up
  // for the first 15 minutes or so; 40 minutes of session starts keep the later half steady.
  durationSeconds: 2400,
  // Calibrated like generator.ts's presets: round-robin keeps the fleet's prefill about half busy
  // at x1 (52% measured; about 3,000 requests).
  sessionsPerSecond: 0.048,
  // A few tenants (teams or products running agents), with a dominant one.
  tenants: 6,
  tenantZipf: 1.0,
  // Chosen to span a lean agent to one with many tools (e.g. several MCP servers).
  preambleTokens: [6000, 20000],
  toolDefinitionShare: 0.6,
  toolsPerTenant: [10, 40],
  // Tens of turns: chosen so that the long sessions reach 100k+ tokens of context.
  turns: [10, 60],
  // From a one-line request to a pasted error or spec: chosen.
  taskTokens: [50, 1500],
  // Mostly one call, sometimes parallel calls (several reads at once): chosen.
  toolCallsPerTurn: [0.7, 0.2, 0.1],
  // From a short command output to a long source file: chosen.
  toolOutputTokens: [200, 8000],
  // Chosen: most answers go to tools; one in ten goes back to the human, who replies briefly.
  humanTurnProbability: 0.1,
  userMessageTokens: [20, 1000],
  // From a short tool call to a code edit: chosen.
  outputTokens: [50, 1500],
  // DEFAULT_FLEET.decodeRate (bench/fleet.ts), so at x1 a turn does not arrive before the
  // previous answer could have been decoded.
  answerTokensPerSecond: 40,
  // Chosen: most tools return within seconds, builds and tests take up to a minute or two (p99
  // 31 s). With the answer's streaming time, pauses have a median of about 14 s.
  toolSeconds: { median: 3, sigma: 1.0 },
  // Chosen: a human reads and replies in about a minute, up to several minutes (p99 6 min).
  humanSeconds: { median: 60, sigma: 0.8 },
  // The 200k-token context window coding agents commonly run with (Claude Code's default).
  maxContextTokens: 200_000,
};

/** First entity id of this workload (see the file comment). */
export const ID_BASE = 2 ** 30;
const MAX_TURNS = 64;
const MAX_CALLS = 4;
const MAX_TOOLS = 63;
const ENGINE_BLOCK_TOKENS = 64;
const CHARS_PER_TOKEN = DEFAULT_PREFIX_SETTINGS.charsPerToken;
/**
 * Tokens a step's rendering adds besides its texts (roles, separators, the tool-call JSON), for
 * the context cap only: about 30 for an assistant message with one call and its tool message.
 */
const STEP_OVERHEAD_TOKENS = 32;

/** One tool call of an assistant message and the output the tool returns. */
export interface PlannedCall {
  tool: number;
  outputTokens: number;
}

/** What request k appends to request k-1's prompt, after request k-1's answer. */
export interface PlannedStep {
  /** The answer went to the human: the step is the answer and the human's reply. */
  human: boolean;
  /** Tool steps: the answer's calls and their outputs. */
  calls: PlannedCall[];
  /** Human steps: the reply's tokens. */
  userTokens: number;
}

/** A session as drawn: sizes and times only, no text. */
export interface PlannedSession {
  id: number;
  tenant: number;
  /** Request k's arrival, ms. */
  arrivals: number[];
  /** Request k's answer tokens. */
  outputs: number[];
  taskTokens: number;
  /** steps[k] (k >= 1) makes request k's prompt from request k-1's; steps[0] is unused. */
  steps: PlannedStep[];
}

export interface AgenticPlan {
  cfg: AgenticConfig;
  /** Preamble tokens per tenant. */
  preambleTokens: number[];
  /** Tools defined per tenant. */
  tools: number[];
  sessions: PlannedSession[];
}

export interface AgenticOptions {
  /** Shortens the arrival window (the --quick slice). */
  durationSeconds?: number | undefined;
}

/**
 * Draws every session of the workload, all randomness in one fixed order: tenants' preambles,
 * then each session in start order (its start, tenant, length, task, then turn by turn). A
 * session's draws do not depend on the window, so a shorter window gives a prefix of the longer
 * window's sessions with the same turns.
 */
export function planAgentic(cfg: AgenticConfig, opts: AgenticOptions = {}): AgenticPlan {
  if (cfg.turns[1] > MAX_TURNS || cfg.toolCallsPerTurn.length > MAX_CALLS || cfg.toolsPerTenant[1] > MAX_TOOLS) {
    throw new Error(`agentic: at most ${MAX_TURNS} turns, ${MAX_CALLS} calls per turn and ${MAX_TOOLS} tools per tenant`);
  }
  const rnd = seededRandom(cfg.seed);
  const uniform = ([a, b]: [number, number]) => a + Math.floor(rnd() * (b - a + 1));
  const logUniform = ([a, b]: [number, number]) => Math.min(b, Math.floor(a * Math.pow((b + 1) / a, rnd())));
  const exp = (mean: number) => -Math.log(1 - rnd()) * mean;
  const logNormal = ({ median, sigma }: LogNormal) => {
    // Box-Muller: always two draws.
    const u1 = 1 - rnd();
    const u2 = rnd();
    return median * Math.exp(sigma * Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2));
  };
  const calls = () => {
    const u = rnd();
    let acc = 0;
    for (let i = 0; i < cfg.toolCallsPerTurn.length; i++) if (u < (acc += cfg.toolCallsPerTurn[i]!)) return i + 1;
    return cfg.toolCallsPerTurn.length;
  };
  const tenantOf = zipfSampler(cfg.tenants, cfg.tenantZipf, rnd);
  const preambleTokens = Array.from({ length: cfg.tenants }, () => uniform(cfg.preambleTokens));
  const tools = Array.from({ length: cfg.tenants }, () => uniform(cfg.toolsPerTenant));
  const duration = (opts.durationSeconds ?? cfg.durationSeconds) * 1000;
  const sessions: PlannedSession[] = [];
  const gap = 1000 / cfg.sessionsPerSecond;
  for (let t = exp(gap); t < duration; t += exp(gap)) {
    const tenant = tenantOf();
    const n = logUniform(cfg.turns);
    const s: PlannedSession = {
      id: sessions.length,
      tenant,
      arrivals: [t],
      outputs: [],
      taskTokens: logUniform(cfg.taskTokens),
      steps: [],
    };
    let context = preambleTokens[tenant]! + s.taskTokens + STEP_OVERHEAD_TOKENS;
    let ended = false;
    for (let k = 0; k < n; k++) {
      s.outputs.push(logUniform(cfg.outputTokens));
      if (k === 0) {
        s.steps.push({ human: false, calls: [], userTokens: 0 });
        continue;
      }
      const prevAnswer = s.outputs[k - 1]!;
      const human = rnd() < cfg.humanTurnProbability;
      const step: PlannedStep = { human, calls: [], userTokens: 0 };
      if (human) step.userTokens = logUniform(cfg.userMessageTokens);
      else
        for (let c = calls(); c > 0; c--)
          step.calls.push({ tool: Math.floor(rnd() * tools[tenant]!), outputTokens: logUniform(cfg.toolOutputTokens) });
      const pause = (prevAnswer / cfg.answerTokensPerSecond) * 1000 + logNormal(human ? cfg.humanSeconds : cfg.toolSeconds) * 1000;
      // Every turn is drawn even past the context cap, so the draws of later sessions do not
      // depend on where this one ends.
      const added =
        prevAnswer +
        step.userTokens +
        step.calls.reduce((a, c) => a + c.outputTokens, 0) +
        STEP_OVERHEAD_TOKENS * Math.max(1, step.calls.length);
      if (ended || context + added > cfg.maxContextTokens) {
        ended = true;
        continue;
      }
      context += added;
      s.steps.push(step);
      s.arrivals.push(s.arrivals[k - 1]! + pause);
    }
    s.outputs.length = s.arrivals.length;
    sessions.push(s);
  }
  if (sessions.length * MAX_TURNS * MAX_CALLS > 2 ** 32 - ID_BASE) throw new Error("agentic: too many sessions for distinct entity ids");
  return { cfg, preambleTokens, tools, sessions };
}

/** Entity id of part `part` of turn `turn` of session `session` (see the file comment). */
function turnId(session: number, turn: number, part: number): number {
  return ID_BASE + (session * MAX_TURNS + turn) * MAX_CALLS + part;
}

/** Entity id of a tenant's instructions (slot 0) or tool `slot - 1`'s description. */
function tenantId(tenant: number, slot: number): number {
  return ID_BASE + tenant * (MAX_TOOLS + 1) + slot;
}

const text = (kind: number, id: number, tokens: number) => entityText(kind, id, tokens * CHARS_PER_TOKEN);

/** A tenant's tool definitions (the request's `tools`) and system message. */
function preamble(plan: AgenticPlan, tenant: number): { tools: unknown[]; system: CanonicalMessage } {
  const total = plan.preambleTokens[tenant]!;
  const n = plan.tools[tenant]!;
  const perTool = Math.floor((total * plan.cfg.toolDefinitionShare) / n);
  const tools = Array.from({ length: n }, (_, i) => ({
    type: "function",
    function: {
      name: `tool_${i}`,
      description: text(KIND.system, tenantId(tenant, 1 + i), perTool),
      parameters: { type: "object", properties: { input: { type: "string" } }, required: ["input"] },
    },
  }));
  return { tools, system: { role: "system", content: text(KIND.system, tenantId(tenant, 0), total - perTool * n) } };
}

/** The messages step k adds: request k-1's answer, then the tool outputs or the human's reply. */
function stepMessages(s: PlannedSession, k: number): CanonicalMessage[] {
  const step = s.steps[k]!;
  const answer = s.outputs[k - 1]!;
  if (step.human) {
    return [
      { role: "assistant", content: text(KIND.answer, turnId(s.id, k - 1, 0), answer) },
      { role: "user", content: text(KIND.userTurn, turnId(s.id, k, 0), step.userTokens) },
    ];
  }
  const ids = step.calls.map((_, c) => `call_${s.id}_${k - 1}_${c}`);
  const argTokens = Math.max(1, Math.floor(answer / step.calls.length));
  const assistant: CanonicalMessage = {
    role: "assistant",
    content: null,
    tool_calls: step.calls.map((call, c) => ({
      id: ids[c],
      type: "function",
      function: { name: `tool_${call.tool}`, arguments: JSON.stringify({ input: text(KIND.answer, turnId(s.id, k - 1, c), argTokens) }) },
    })),
  };
  return [
    assistant,
    ...step.calls.map((call, c) => ({
      role: "tool",
      tool_call_id: ids[c],
      content: text(KIND.document, turnId(s.id, k, c), call.outputTokens),
    })),
  ];
}

/** The prompt of request `turn` of a planned session (for tests and inspection). */
export function agenticPrompt(plan: AgenticPlan, s: PlannedSession, turn: number): CanonicalPrompt {
  const { tools, system } = preamble(plan, s.tenant);
  const messages: CanonicalMessage[] = [system, { role: "user", content: text(KIND.userTurn, turnId(s.id, 0, 0), s.taskTokens) }];
  for (let k = 1; k <= turn; k++) messages.push(...stepMessages(s, k));
  return { kind: "chat", tools, messages };
}

/**
 * The workload: every turn arriving within the window, as a request with the router's view
 * (production `prefixKey` in the tenant's namespace) and the engine's (`engineBlocks`), sorted by
 * arrival, ids 0..n-1.
 */
export function generateAgentic(cfg: AgenticConfig, opts: AgenticOptions = {}): Workload {
  const plan = planAgentic(cfg, opts);
  const duration = (opts.durationSeconds ?? cfg.durationSeconds) * 1000;
  const preambles = plan.preambleTokens.map((_, t) => preamble(plan, t));
  const out: Array<{ session: number; turn: number; req: BenchRequest }> = [];
  for (const s of plan.sessions) {
    const { tools, system } = preambles[s.tenant]!;
    const namespace = `tenant-${s.tenant}`;
    const messages: CanonicalMessage[] = [system, { role: "user", content: text(KIND.userTurn, turnId(s.id, 0, 0), s.taskTokens) }];
    for (let k = 0; k < s.arrivals.length && s.arrivals[k]! < duration; k++) {
      if (k > 0) messages.push(...stepMessages(s, k));
      const prompt = { kind: "chat" as const, tools, messages };
      const key = prefixKey(prompt, { model: "bench-model", namespace }, DEFAULT_PREFIX_SETTINGS);
      out.push({
        session: s.id,
        turn: k,
        req: {
          id: 0,
          arrival: s.arrivals[k]!,
          sessionKey: `t${s.tenant}/s${s.id}`,
          hashes: key.hashes,
          promptTokens: key.promptTokens,
          trueBlocks: engineBlocks(canonicalText(prompt)),
          outputTokens: s.outputs[k]!,
        },
      });
    }
  }
  out.sort((a, b) => a.req.arrival - b.req.arrival || a.session - b.session || a.turn - b.turn);
  const requests = out.map((x, id) => ({ ...x.req, id }));
  return { name: cfg.name, description: cfg.description, trueBlockTokens: ENGINE_BLOCK_TOKENS, requests };
}
