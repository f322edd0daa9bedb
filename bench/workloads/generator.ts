/**
 * A seeded generator of multi-tenant chat traffic, for the reuse patterns the Mooncake trace
 * cannot show (it has no users, tenants or sessions).
 *
 * Model (every knob is a field of {@link GeneratorConfig}):
 * - Sessions start as a Poisson process (`sessionsPerSecond`). A session belongs to a tenant
 *   (Zipf popularity `tenantZipf`) and to one of the tenant's users (uniform); the user is the
 *   request's sessionKey, as an `x-session-id` header or `prompt_cache_key` would carry it.
 * - Every tenant has one long system prompt (`systemPromptTokens`), shared by all its users.
 * - With probability `documentProbability` a session opens with a document/template from its
 *   tenant's pool of `documents` (Zipf popularity `documentZipf`), shared across users.
 * - A session has a geometric number of turns (mean `meanTurns`), `thinkTimeSeconds` apart
 *   (exponential, open loop). Turn k's prompt is the system prompt, the document, and every earlier
 *   user message and answer, then the new user message: prompts grow, and each turn's prefix is
 *   the previous turn's prompt plus its answer.
 *
 * Router view: the prompt is an OpenAI-style message list, canonicalised and hashed by the
 * production `prefixKey` in the tenant's namespace. Fleet view: the engine caches the same
 * canonical text (standing in for the chat template's rendering) in 64-token (256-character)
 * blocks under its own chained hash, independent of the router's 512-character blocks.
 */
import { prefixKey, DEFAULT_PREFIX_SETTINGS } from "../../src/core/prefix.ts";
import { canonicalText, type CanonicalMessage } from "../../src/core/canonical.ts";
import { hashBlock, seedHash, type Hash64 } from "../../src/core/hash.ts";
import { seededRandom, zipfSampler } from "../../src/core/random.ts";
import { entityText, KIND } from "../text.ts";
import type { BenchRequest, Workload } from "./types.ts";

export interface GeneratorConfig {
  name: string;
  description: string;
  seed: number;
  /** Sessions start within [0, durationSeconds); later turns past it are dropped. */
  durationSeconds: number;
  sessionsPerSecond: number;
  tenants: number;
  tenantZipf: number;
  /** Uniform range per tenant. */
  systemPromptTokens: [number, number];
  usersPerTenant: number;
  meanTurns: number;
  thinkTimeSeconds: number;
  userTurnTokens: [number, number];
  answerTokens: [number, number];
  /** Documents per tenant. */
  documents: number;
  documentZipf: number;
  documentTokens: [number, number];
  documentProbability: number;
}

/** Sessions own their reuse: short system prompts, few documents, long growing conversations. */
export const CHAT_HEAVY: GeneratorConfig = {
  name: "chat-heavy",
  description: "multi-turn sessions own the reuse (20 tenants, short system prompts, 6 turns mean)",
  seed: 11,
  durationSeconds: 800,
  // Calibrated so that at x1 round-robin keeps the fleet's prefill about half busy, as the
  // Mooncake trace does at x1; the speed sweep then covers the same load range on all workloads.
  sessionsPerSecond: 3,
  tenants: 20,
  tenantZipf: 1.0,
  systemPromptTokens: [500, 3000],
  usersPerTenant: 200,
  meanTurns: 6,
  thinkTimeSeconds: 45,
  userTurnTokens: [50, 600],
  answerTokens: [100, 800],
  documents: 50,
  documentZipf: 1.1,
  documentTokens: [2000, 10000],
  documentProbability: 0.2,
};

/** Reuse is shared across users: long system prompts and popular documents, short sessions. */
export const TEMPLATE_HEAVY: GeneratorConfig = {
  name: "template-heavy",
  description: "shared templates own the reuse (4 tenants, long system prompts, Zipf documents, 1.5 turns mean)",
  seed: 12,
  durationSeconds: 900,
  // Calibrated like CHAT_HEAVY's: round-robin about half busy at x1.
  sessionsPerSecond: 9,
  tenants: 4,
  tenantZipf: 0.8,
  systemPromptTokens: [2000, 6000],
  usersPerTenant: 500,
  meanTurns: 1.5,
  thinkTimeSeconds: 30,
  userTurnTokens: [50, 400],
  answerTokens: [50, 400],
  documents: 100,
  documentZipf: 1.1,
  documentTokens: [2000, 12000],
  documentProbability: 0.9,
};

export const GENERATED = { "chat-heavy": CHAT_HEAVY, "template-heavy": TEMPLATE_HEAVY } as const;

export const ENGINE_BLOCK_TOKENS = 64;
const CHARS_PER_TOKEN = DEFAULT_PREFIX_SETTINGS.charsPerToken;
const ENGINE_SEED: Hash64 = seedHash("bench-engine");

/** The engine's block ids for a text: chained 64-token blocks, folded into 53-bit numbers. */
export function engineBlocks(text: string): number[] {
  const blockChars = ENGINE_BLOCK_TOKENS * CHARS_PER_TOKEN;
  const out: number[] = [];
  let state = ENGINE_SEED;
  for (let start = 0; start < text.length; start += blockChars) {
    state = hashBlock(state, text, start, Math.min(start + blockChars, text.length));
    out.push((state.hi & 0x1fffff) * 4294967296 + state.lo);
  }
  return out;
}

export interface GenerateOptions {
  /** Shortens the arrival window (the --quick slice). */
  durationSeconds?: number | undefined;
}

export function generate(cfg: GeneratorConfig, opts: GenerateOptions = {}): Workload {
  const rnd = seededRandom(cfg.seed);
  const uniform = ([a, b]: [number, number]) => a + Math.floor(rnd() * (b - a + 1));
  const exp = (mean: number) => -Math.log(1 - rnd()) * mean;
  const tenantOf = zipfSampler(cfg.tenants, cfg.tenantZipf, rnd);
  const docOf = zipfSampler(cfg.documents, cfg.documentZipf, rnd);
  const systemTokens = Array.from({ length: cfg.tenants }, () => uniform(cfg.systemPromptTokens));
  const docTokens = Array.from({ length: cfg.tenants * cfg.documents }, () => uniform(cfg.documentTokens));
  const duration = (opts.durationSeconds ?? cfg.durationSeconds) * 1000;
  // Session templates first (all randomness drawn in one fixed order), text and hashes after.
  interface Turn {
    at: number;
    session: number;
    tenant: number;
    user: number;
    doc: number;
    turn: number;
    userTokens: number[];
    answerTokens: number[];
  }
  const turns: Turn[] = [];
  let session = 0;
  for (let t = exp(1000 / cfg.sessionsPerSecond); t < duration; t += exp(1000 / cfg.sessionsPerSecond)) {
    const tenant = tenantOf();
    const user = Math.floor(rnd() * cfg.usersPerTenant);
    const doc = rnd() < cfg.documentProbability ? tenant * cfg.documents + docOf() : -1;
    // Geometric with mean meanTurns, capped so entity ids stay distinct.
    let n = 1;
    while (n < 64 && rnd() > 1 / cfg.meanTurns) n++;
    const userTokens: number[] = [];
    const answerTokens: number[] = [];
    let at = t;
    for (let k = 0; k < n; k++) {
      userTokens.push(uniform(cfg.userTurnTokens));
      answerTokens.push(uniform(cfg.answerTokens));
      if (at < duration) turns.push({ at, session, tenant, user, doc, turn: k, userTokens, answerTokens });
      at += exp(cfg.thinkTimeSeconds * 1000);
    }
    session++;
  }
  turns.sort((a, b) => a.at - b.at || a.session - b.session);

  const requests: BenchRequest[] = turns.map((x, id) => {
    const messages: CanonicalMessage[] = [
      { role: "system", content: entityText(KIND.system, x.tenant, systemTokens[x.tenant]! * CHARS_PER_TOKEN) },
    ];
    for (let k = 0; k <= x.turn; k++) {
      let content = entityText(KIND.userTurn, x.session * 64 + k, x.userTokens[k]! * CHARS_PER_TOKEN);
      if (k === 0 && x.doc >= 0) content = entityText(KIND.document, x.doc, docTokens[x.doc]! * CHARS_PER_TOKEN) + "\n\n" + content;
      messages.push({ role: "user", content });
      if (k < x.turn) {
        messages.push({ role: "assistant", content: entityText(KIND.answer, x.session * 64 + k, x.answerTokens[k]! * CHARS_PER_TOKEN) });
      }
    }
    const prompt = { kind: "chat" as const, messages };
    const key = prefixKey(prompt, { model: "bench-model", namespace: `tenant-${x.tenant}` }, DEFAULT_PREFIX_SETTINGS);
    return {
      id,
      arrival: x.at,
      sessionKey: `t${x.tenant}/u${x.user}`,
      hashes: key.hashes,
      promptTokens: key.promptTokens,
      trueBlocks: engineBlocks(canonicalText(prompt)),
      outputTokens: x.answerTokens[x.turn]!,
    };
  });
  return { name: cfg.name, description: cfg.description, trueBlockTokens: ENGINE_BLOCK_TOKENS, requests };
}

/**
 * One tenant of a multi-tenant mix ({@link generateMix}): its own traffic (the knobs of
 * {@link GeneratorConfig}, for this tenant alone), its priority class and objective.
 */
export interface TenantSpec {
  name: string;
  priority: "interactive" | "standard" | "batch";
  /** Its configured time-to-first-token objective (ms); undefined: the default formula. */
  objectiveMs?: number;
  /** Its own seed: a tenant's traffic does not change when another's does (the flood scenario). */
  seed: number;
  sessionsPerSecond: number;
  systemPromptTokens: [number, number];
  users: number;
  meanTurns: number;
  thinkTimeSeconds: number;
  userTurnTokens: [number, number];
  answerTokens: [number, number];
  documents: number;
  documentZipf: number;
  documentTokens: [number, number];
  documentProbability: number;
}

export interface MixConfig {
  name: string;
  description: string;
  durationSeconds: number;
  tenants: TenantSpec[];
}

/**
 * The multi-tenant mix of bench/goodput.ts: two interactive chat tenants (sessions own their
 * reuse), two standard RAG tenants (a long instruction template and Zipf-popular documents shared
 * across users), and one batch tenant whose jobs are long documents (8k-32k tokens, nearly all
 * distinct) under a shared 1.5k-token instruction, with a loose 60 s objective. The batch tenant
 * brings about half of the prefill the fleet computes (bench/GOODPUT.md states the measured
 * shares), the load under which interactive traffic must be protected.
 */
export const MIX: MixConfig = {
  name: "mix",
  description: "multi-tenant mix: 2 interactive chat tenants, 2 standard RAG tenants, 1 batch tenant (long documents, 60 s objective)",
  durationSeconds: 600,
  tenants: [
    {
      name: "chat-a",
      priority: "interactive",
      seed: 101,
      sessionsPerSecond: 1.2,
      systemPromptTokens: [500, 3000],
      users: 300,
      meanTurns: 6,
      thinkTimeSeconds: 45,
      userTurnTokens: [50, 600],
      answerTokens: [100, 800],
      documents: 20,
      documentZipf: 1.1,
      documentTokens: [2000, 8000],
      documentProbability: 0.2,
    },
    {
      name: "chat-b",
      priority: "interactive",
      seed: 102,
      sessionsPerSecond: 0.8,
      systemPromptTokens: [500, 3000],
      users: 200,
      meanTurns: 6,
      thinkTimeSeconds: 45,
      userTurnTokens: [50, 600],
      answerTokens: [100, 800],
      documents: 20,
      documentZipf: 1.1,
      documentTokens: [2000, 8000],
      documentProbability: 0.2,
    },
    {
      name: "rag-a",
      priority: "standard",
      seed: 103,
      sessionsPerSecond: 3,
      systemPromptTokens: [2000, 6000],
      users: 500,
      meanTurns: 1.5,
      thinkTimeSeconds: 30,
      userTurnTokens: [50, 400],
      answerTokens: [50, 400],
      documents: 100,
      documentZipf: 1.1,
      documentTokens: [2000, 12000],
      documentProbability: 0.9,
    },
    {
      name: "rag-b",
      priority: "standard",
      seed: 104,
      sessionsPerSecond: 2,
      systemPromptTokens: [2000, 6000],
      users: 500,
      meanTurns: 1.5,
      thinkTimeSeconds: 30,
      userTurnTokens: [50, 400],
      answerTokens: [50, 400],
      documents: 100,
      documentZipf: 1.1,
      documentTokens: [2000, 12000],
      documentProbability: 0.9,
    },
    {
      name: "batch",
      priority: "batch",
      objectiveMs: 60_000,
      seed: 105,
      sessionsPerSecond: 1.15,
      systemPromptTokens: [1500, 1500],
      // Jobs, not sessions: every job its own key, so no session hint ties them together.
      users: 1_000_000,
      meanTurns: 1,
      thinkTimeSeconds: 1,
      userTurnTokens: [50, 200],
      answerTokens: [100, 400],
      documents: 100_000,
      documentZipf: 0.01,
      documentTokens: [8000, 32000],
      documentProbability: 1,
    },
  ],
};

/**
 * What one step of MixOptions.seedOffset adds to every tenant's seed: past the spacing of the
 * tenants' own seeds (consecutive), so a shifted draw never hands a tenant another's random stream.
 */
const SEED_STRIDE = 1_000;

export interface MixOptions {
  /** Shortens the arrival window (the --quick slice). */
  durationSeconds?: number | undefined;
  /** Multiplies named tenants' session rates (the flood scenario: one tenant at several times its share). */
  rateFactor?: Readonly<Record<string, number>>;
  /**
   * When `rateFactor` starts (s) [0: from the first arrival]: before it the tenants send at their
   * own rates (their history), from it at the multiplied one. The other tenants are unchanged.
   */
  rateFactorFromSeconds?: number | undefined;
  /**
   * Every tenant's seed shifted by this many SEED_STRIDEs [0]: the same tenants drawn anew (other users, sessions, document
   * lengths and arrivals), for checking a result on traffic it was not developed on.
   */
  seedOffset?: number | undefined;
}

/**
 * Generates a multi-tenant mix: each tenant's sessions as in {@link generate} (system prompt,
 * optional document, growing turns), from the tenant's own seed and in its own text and hash
 * namespace, merged by arrival. Requests carry their tenant, class and configured objective.
 */
export function generateMix(cfg: MixConfig, opts: MixOptions = {}): Workload {
  const duration = (opts.durationSeconds ?? cfg.durationSeconds) * 1000;
  interface Turn {
    at: number;
    tenant: number;
    session: number;
    doc: number;
    turn: number;
    userTokens: number[];
    answerTokens: number[];
    user: number;
  }
  const turns: Turn[] = [];
  const systemTokens: number[] = [];
  const docTokens: Array<Map<number, number>> = [];
  cfg.tenants.forEach((t, ti) => {
    const rnd = seededRandom(t.seed + SEED_STRIDE * (opts.seedOffset ?? 0));
    const uniform = ([a, b]: [number, number]) => a + Math.floor(rnd() * (b - a + 1));
    const exp = (mean: number) => -Math.log(1 - rnd()) * mean;
    const docOf = zipfSampler(t.documents, t.documentZipf, rnd);
    systemTokens.push(uniform(t.systemPromptTokens));
    const docs = new Map<number, number>();
    docTokens.push(docs);
    const factor = opts.rateFactor?.[t.name] ?? 1;
    const from = (opts.rateFactorFromSeconds ?? 0) * 1000;
    const rateAt = (at: number) => t.sessionsPerSecond * (at >= from ? factor : 1);
    // Poisson arrivals at the rate of the moment: a gap drawn before the change that ends past it
    // starts again at the change (memoryless), drawn at the new rate.
    const next = (at: number) => {
      const to = at + exp(1000 / rateAt(at));
      return at < from && to >= from && factor !== 1 ? from + exp(1000 / rateAt(from)) : to;
    };
    let session = 0;
    for (let at0 = next(0); at0 < duration; at0 = next(at0)) {
      const user = Math.floor(rnd() * t.users);
      const doc = rnd() < t.documentProbability ? docOf() : -1;
      // A document's length is drawn once, where it is first used, from the tenant's stream.
      if (doc >= 0 && !docs.has(doc)) docs.set(doc, uniform(t.documentTokens));
      let n = 1;
      while (n < 64 && rnd() > 1 / t.meanTurns) n++;
      const userTokens: number[] = [];
      const answerTokens: number[] = [];
      let at = at0;
      for (let k = 0; k < n; k++) {
        userTokens.push(uniform(t.userTurnTokens));
        answerTokens.push(uniform(t.answerTokens));
        if (at < duration) turns.push({ at, tenant: ti, session, doc, turn: k, userTokens, answerTokens, user });
        at += exp(t.thinkTimeSeconds * 1000);
      }
      session++;
    }
  });
  turns.sort((a, b) => a.at - b.at || a.tenant - b.tenant || a.session - b.session || a.turn - b.turn);

  // Entity ids per tenant, so no two tenants share text: tenant x 2^32 + the tenant's own id.
  const T = 4294967296;
  const requests: BenchRequest[] = turns.map((x, id) => {
    const t = cfg.tenants[x.tenant]!;
    const messages: CanonicalMessage[] = [
      { role: "system", content: entityText(KIND.system, x.tenant * T + 1, systemTokens[x.tenant]! * CHARS_PER_TOKEN) },
    ];
    for (let k = 0; k <= x.turn; k++) {
      const turnId = x.tenant * T + x.session * 64 + k;
      let content = entityText(KIND.userTurn, turnId, x.userTokens[k]! * CHARS_PER_TOKEN);
      if (k === 0 && x.doc >= 0) {
        const doc = entityText(KIND.document, x.tenant * T + x.doc, docTokens[x.tenant]!.get(x.doc)! * CHARS_PER_TOKEN);
        content = doc + "\n\n" + content;
      }
      messages.push({ role: "user", content });
      if (k < x.turn) messages.push({ role: "assistant", content: entityText(KIND.answer, turnId, x.answerTokens[k]! * CHARS_PER_TOKEN) });
    }
    const prompt = { kind: "chat" as const, messages };
    const key = prefixKey(prompt, { model: "bench-model", namespace: `tenant-${t.name}` }, DEFAULT_PREFIX_SETTINGS);
    const out: BenchRequest = {
      id,
      arrival: x.at,
      sessionKey: `${t.name}/u${x.user}`,
      hashes: key.hashes,
      promptTokens: key.promptTokens,
      trueBlocks: engineBlocks(canonicalText(prompt)),
      outputTokens: x.answerTokens[x.turn]!,
      tenant: t.name,
      priority: t.priority,
    };
    if (t.objectiveMs !== undefined) out.objectiveMs = t.objectiveMs;
    return out;
  });
  const flood = Object.entries(opts.rateFactor ?? {}).filter(([, f]) => f !== 1);
  const since = opts.rateFactorFromSeconds ? ` from ${opts.rateFactorFromSeconds} s` : "";
  const parts = [...flood.map(([n, f]) => `${n} x${f}${since}`), ...(opts.seedOffset ? [`seeds +${opts.seedOffset}`] : [])];
  const suffix = parts.length > 0 ? ` (${parts.join(", ")})` : "";
  return { name: cfg.name, description: cfg.description + suffix, trueBlockTokens: ENGINE_BLOCK_TOKENS, requests };
}
