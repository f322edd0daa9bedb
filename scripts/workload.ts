/**
 * The demo's workload: a seeded, deterministic generator of multi-tenant chat traffic (pure: no
 * I/O, no clock). The same options always give the same requests, byte for byte.
 *
 * Model (every knob is a field of {@link WorkloadOptions}; docs/demo.md has the table):
 * - **Tenants** (`tenants`, popularity Zipf `tenantZipf`). Each has one long system prompt
 *   (`systemPromptChars`) that every request of the tenant starts with, and a pool of
 *   `documentsPerTenant` documents/templates (`documentChars` each) reused across its users.
 * - **Users** (`usersPerTenant`, uniform). A user's id is the request's session key (the demo sends
 *   it as `x-session-id`); a user may hold several conversations over the run.
 * - **Conversations** start as a Poisson process; the rate is chosen so that requests arrive at
 *   `requestsPerSecond` on average. A conversation opens with a document with probability
 *   `documentShare` (which one: Zipf `documentZipf` over the tenant's pool) and lasts a geometric
 *   number of turns (mean `meanTurns`, at most `maxTurns`), `thinkSeconds` apart (exponential).
 * - **Turns grow.** Turn k's messages are the system prompt, then every earlier user message and
 *   assistant answer of the conversation, then the new user message (`userMessageChars`). The
 *   answer (`answerChars`) stands in for the model's reply, as a client would send it back. So turn
 *   k+1's messages extend turn k's exactly: a conversation owns its reuse, while system prompts
 *   and documents give the cross-user reuse that sticky sessions cannot see.
 *
 * Times are model time (the fleet at time factor 1); the demo divides them by its time factor.
 * Text is generated English-like prose (4 characters are about one token for the fleet).
 */
import { seededRandom, zipfSampler } from "../src/core/random.ts";

/** The workload's knobs. Lengths are characters (the fleet counts 4 characters a token). */
export interface WorkloadOptions {
  /** Seed of every random draw. */
  seed: number;
  /** Total requests (turns) generated: the first `requests` turns by arrival time. */
  requests: number;
  /** Tenants (applications), each with its own system prompt and document pool. */
  tenants: number;
  /** Zipf exponent of tenant popularity (0 = uniform). */
  tenantZipf: number;
  /** Users per tenant, chosen uniformly per conversation. */
  usersPerTenant: number;
  /** System prompt length range, per tenant (uniform). */
  systemPromptChars: [number, number];
  /** Documents/templates per tenant. */
  documentsPerTenant: number;
  /** Zipf exponent of document popularity within a tenant. */
  documentZipf: number;
  /** Document length range (uniform). */
  documentChars: [number, number];
  /** Share of conversations whose first message attaches a document. */
  documentShare: number;
  /** Mean turns per conversation (geometric). */
  meanTurns: number;
  /** Cap on turns per conversation. */
  maxTurns: number;
  /** Length range of a user message (uniform). */
  userMessageChars: [number, number];
  /** Length range of an assistant answer sent back in the history (uniform). */
  answerChars: [number, number];
  /** Mean request arrival rate, requests per second of model time (Poisson conversation starts). */
  requestsPerSecond: number;
  /** Mean think time between a conversation's turns, seconds of model time (exponential). */
  thinkSeconds: number;
  /** `max_tokens` of every request. */
  maxTokens: number;
  /** Model name. */
  model: string;
}

export const DEFAULT_WORKLOAD: WorkloadOptions = {
  seed: 1,
  requests: 1000,
  tenants: 4,
  tenantZipf: 0.5,
  usersPerTenant: 60,
  systemPromptChars: [6_000, 14_000],
  documentsPerTenant: 40,
  documentZipf: 0.8,
  documentChars: [10_000, 40_000],
  documentShare: 0.9,
  meanTurns: 2,
  maxTurns: 10,
  userMessageChars: [200, 1_200],
  answerChars: [400, 2_000],
  requestsPerSecond: 8,
  thinkSeconds: 20,
  maxTokens: 32,
  model: "llama-3.1-8b-instruct",
};

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** One request of the workload. */
export interface WorkloadRequest {
  /** Index in arrival order. */
  id: number;
  /** Arrival, ms of model time from the start. */
  at: number;
  /** Tenant index, 0-based. */
  tenant: number;
  /** The user: the session key (`x-session-id`). */
  user: string;
  conversation: number;
  /** Turn within the conversation, 0-based. Turn k+1 is sent only after turn k has been answered. */
  turn: number;
  /** Document index within the tenant's pool, if the conversation attached one. */
  document: number | undefined;
  /** Request id of the conversation's previous turn, if any. */
  previous: number | undefined;
  /** The OpenAI chat completion body (streamed, with usage). */
  body: {
    model: string;
    messages: ChatMessage[];
    max_tokens: number;
    stream: true;
    stream_options: { include_usage: true };
  };
}

export interface Workload {
  options: WorkloadOptions;
  requests: WorkloadRequest[];
  /** Conversations that contributed at least one request. */
  conversations: number;
}

// ---------------------------------------------------------------------------------------------
// Randomness and text

/** The routing core's seeded generator (mulberry32), so a seed means the same everywhere. */
export const rng = seededRandom;

/** FNV-1a over a string: seeds a per-entity generator, so an entity's text never depends on draw order. */
function hashSeed(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

const WORDS = (
  "the of and to in is that for it as with was on be by this are from at or an have not which but all " +
  "can their has more one will other about been would these when there what so its into only some time than " +
  "them may also new such after first two any most over where through then between each should because under " +
  "data system service customer account policy request report contract agreement section clause party term " +
  "payment invoice schedule delivery product order support ticket issue release version feature update user " +
  "team project budget quarter revenue cost risk review approval process document template summary analysis " +
  "requirement design model network server storage security access control audit compliance incident change " +
  "notice period renewal termination liability warranty license fee rate price discount region market sales " +
  "employee manager benefit leave travel expense claim form field value record table column query result " +
  "error warning status response latency cache memory limit threshold metric dashboard alert owner deadline " +
  "meeting decision action plan goal milestone scope vendor supplier shipment warehouse inventory stock unit " +
  "patient claim coverage provider member plan premium deductible visit treatment note history medication " +
  "student course grade lesson module assignment exam feedback question answer example step method result " +
  "must shall include provide ensure require describe explain confirm update review apply check send receive " +
  "clearly carefully promptly annually monthly weekly daily written standard general specific additional " +
  "current previous following relevant applicable reasonable available required optional internal external"
).split(" ");

const TENANT_NAMES = ["acme-legal", "globex-support", "initech-hr", "umbrella-health", "stark-finance", "wayne-logistics", "hooli-docs"];

/** English-like prose of exactly `chars` characters, deterministic in `key`. */
export function prose(key: string, chars: number): string {
  const rnd = rng(hashSeed(key));
  const parts: string[] = [];
  let length = 0;
  let sentence = 0;
  while (length < chars) {
    const n = 8 + Math.floor(rnd() * 14);
    const words: string[] = [];
    for (let i = 0; i < n; i++) words.push(WORDS[Math.floor(rnd() * rnd() * WORDS.length)]!);
    let s = words.join(" ");
    s = s[0]!.toUpperCase() + s.slice(1) + (rnd() < 0.1 ? "?" : ".");
    s += ++sentence % 6 === 0 ? "\n\n" : " ";
    parts.push(s);
    length += s.length;
  }
  return parts.join("").slice(0, chars);
}

function tenantName(t: number): string {
  const base = TENANT_NAMES[t % TENANT_NAMES.length]!;
  return t < TENANT_NAMES.length ? base : `${base}-${Math.floor(t / TENANT_NAMES.length)}`;
}

function systemPrompt(seed: number, tenant: number, chars: number): string {
  const head = `You are the assistant of ${tenantName(tenant)}. Follow the instructions and policies below exactly. `;
  return (head + prose(`${seed}/system/${tenant}`, chars)).slice(0, Math.max(chars, head.length));
}

function documentText(seed: number, tenant: number, doc: number, chars: number): string {
  const head = `Document ${tenantName(tenant)}/doc-${doc}\n\n`;
  return head + prose(`${seed}/document/${tenant}/${doc}`, Math.max(0, chars - head.length));
}

// ---------------------------------------------------------------------------------------------
// Sampling helpers

/** Mean of a geometric(1/mean) distribution capped at `cap`. */
function cappedGeometricMean(mean: number, cap: number): number {
  const p = 1 / Math.max(1, mean);
  return (1 - Math.pow(1 - p, cap)) / p;
}

function check(o: WorkloadOptions): void {
  const positiveInt = ["requests", "tenants", "usersPerTenant", "documentsPerTenant", "maxTurns", "maxTokens"] as const;
  for (const k of positiveInt) if (!Number.isInteger(o[k]) || o[k] < 1) throw new Error(`workload: ${k} must be a positive integer`);
  const ranges = ["systemPromptChars", "documentChars", "userMessageChars", "answerChars"] as const;
  for (const k of ranges) {
    const [a, b] = o[k];
    if (!(a >= 1 && b >= a)) throw new Error(`workload: ${k} must be [min, max] with 1 <= min <= max`);
  }
  if (!(o.documentShare >= 0 && o.documentShare <= 1)) throw new Error("workload: documentShare must be in [0, 1]");
  if (!(o.requestsPerSecond > 0)) throw new Error("workload: requestsPerSecond must be positive");
  if (!(o.meanTurns >= 1)) throw new Error("workload: meanTurns must be >= 1");
  if (!(o.thinkSeconds >= 0) || !(o.tenantZipf >= 0) || !(o.documentZipf >= 0)) {
    throw new Error("workload: thinkSeconds, tenantZipf and documentZipf must be >= 0");
  }
}

// ---------------------------------------------------------------------------------------------
// The generator

interface Turn {
  at: number;
  conversation: number;
  turn: number;
}

interface Conversation {
  tenant: number;
  user: number;
  document: number | undefined;
  turns: number;
  userChars: number[];
  answerChars: number[];
}

/**
 * Generates the workload. All randomness is drawn first, in one fixed order; text is then a pure
 * function of (seed, entity), so equal options give equal requests.
 *
 * @example
 * const w = generateWorkload({ requests: 100, seed: 7 });
 * w.requests[0].body.messages[0].role === "system";
 */
export function generateWorkload(overrides: Partial<WorkloadOptions> = {}): Workload {
  const o: WorkloadOptions = { ...DEFAULT_WORKLOAD, ...overrides };
  check(o);
  const rnd = rng(o.seed);
  const uniform = ([a, b]: [number, number]) => a + Math.floor(rnd() * (b - a + 1));
  const exp = (mean: number) => -Math.log(1 - rnd()) * mean;
  const tenantOf = zipfSampler(o.tenants, o.tenantZipf, rnd);
  const documentOf = zipfSampler(o.documentsPerTenant, o.documentZipf, rnd);
  const systemChars = Array.from({ length: o.tenants }, () => uniform(o.systemPromptChars));
  const documentChars = Array.from({ length: o.tenants * o.documentsPerTenant }, () => uniform(o.documentChars));

  // Conversations start at rate requestsPerSecond / E[turns], so requests arrive at requestsPerSecond.
  const startGapMs = (1000 * cappedGeometricMean(o.meanTurns, o.maxTurns)) / o.requestsPerSecond;
  const conversations: Conversation[] = [];
  const turns: Turn[] = [];
  // Generate until no later conversation can contribute one of the first `requests` turns.
  let start = 0;
  let horizon = Infinity;
  for (;;) {
    start += exp(startGapMs);
    if (start > horizon) break;
    const tenant = tenantOf();
    const user = Math.floor(rnd() * o.usersPerTenant);
    const document = rnd() < o.documentShare ? documentOf() : undefined;
    let n = 1;
    while (n < o.maxTurns && rnd() > 1 / o.meanTurns) n++;
    const conversation: Conversation = { tenant, user, document, turns: n, userChars: [], answerChars: [] };
    let at = start;
    for (let k = 0; k < n; k++) {
      conversation.userChars.push(uniform(o.userMessageChars));
      conversation.answerChars.push(uniform(o.answerChars));
      turns.push({ at, conversation: conversations.length, turn: k });
      at += exp(o.thinkSeconds * 1000);
    }
    conversations.push(conversation);
    if (turns.length >= o.requests) {
      turns.sort((a, b) => a.at - b.at || a.conversation - b.conversation || a.turn - b.turn);
      turns.length = o.requests;
      horizon = turns[turns.length - 1]!.at;
    }
  }
  turns.sort((a, b) => a.at - b.at || a.conversation - b.conversation || a.turn - b.turn);

  // Text: one message list per conversation, as long as its last kept turn needs.
  const lastTurn = new Map<number, number>();
  for (const t of turns) lastTurn.set(t.conversation, Math.max(lastTurn.get(t.conversation) ?? 0, t.turn));
  const systemTexts = new Map<number, string>();
  const documentTexts = new Map<number, string>();
  const histories = new Map<number, ChatMessage[]>();
  for (const [c, last] of lastTurn) {
    const conv = conversations[c]!;
    let system = systemTexts.get(conv.tenant);
    if (system === undefined) {
      system = systemPrompt(o.seed, conv.tenant, systemChars[conv.tenant]!);
      systemTexts.set(conv.tenant, system);
    }
    const messages: ChatMessage[] = [{ role: "system", content: system }];
    for (let k = 0; k <= last; k++) {
      let content = prose(`${o.seed}/user/${c}/${k}`, conv.userChars[k]!);
      if (k === 0 && conv.document !== undefined) {
        const d = conv.tenant * o.documentsPerTenant + conv.document;
        let doc = documentTexts.get(d);
        if (doc === undefined) {
          doc = documentText(o.seed, conv.tenant, conv.document, documentChars[d]!);
          documentTexts.set(d, doc);
        }
        content = `Use this document to answer.\n\n<document>\n${doc}\n</document>\n\n${content}`;
      }
      messages.push({ role: "user", content });
      if (k < last) messages.push({ role: "assistant", content: prose(`${o.seed}/answer/${c}/${k}`, conv.answerChars[k]!) });
    }
    histories.set(c, messages);
  }

  const idOf = new Map<string, number>();
  const requests = turns.map((t, id): WorkloadRequest => {
    const conv = conversations[t.conversation]!;
    idOf.set(`${t.conversation}/${t.turn}`, id);
    return {
      id,
      at: Math.round(t.at),
      tenant: conv.tenant,
      user: `${tenantName(conv.tenant)}/user-${conv.user}`,
      conversation: t.conversation,
      turn: t.turn,
      document: conv.document,
      previous: t.turn > 0 ? idOf.get(`${t.conversation}/${t.turn - 1}`) : undefined,
      body: {
        model: o.model,
        // System, then turns 0..k: k+1 user messages and k answers.
        messages: histories.get(t.conversation)!.slice(0, 2 * t.turn + 2),
        max_tokens: o.maxTokens,
        stream: true,
        stream_options: { include_usage: true },
      },
    };
  });
  return { options: o, requests, conversations: lastTurn.size };
}

/** Characters of a request's prompt (message contents), for sizing. */
export function promptChars(r: WorkloadRequest): number {
  let n = 0;
  for (const m of r.body.messages) n += m.content.length;
  return n;
}
