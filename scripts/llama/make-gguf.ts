/**
 * Writes a tiny, deterministic GGUF v3 model that real llama.cpp (`llama-server`) loads: the
 * `llama` architecture with seeded random weights, a SentencePiece-style ("llama") vocabulary and a
 * ChatML chat template. It exists so tests can run a REAL inference server without downloading a
 * model. The text it produces is meaningless; what matters is that prompt processing, KV caching,
 * slots, metrics and the HTTP API behave exactly as with a real model.
 *
 *   node scripts/llama/make-gguf.ts --out /tmp/tiny.gguf [--seed 42] [--layers 3]
 *
 * Layout choices (default file: ~8.8 MB, all tensors F32 so no conversion code is needed):
 * - hyper-parameters: 256 embedding dims, 4 heads of 64 (no GQA), 3 layers, FFN 512, rope base
 *   10000, training context 8192 (so `-c 4096`/`-c 8192` load without a warning). KV cache is
 *   3 layers x 2 (K,V) x 256 x f16 = 3 KiB per token.
 * - vocabulary (512 tokens): 0 `<unk>`, 1 `<s>`, 2 `</s>`, 3..258 byte-fallback `<0x00>`..`<0xFF>`
 *   (type BYTE), 259 `<|im_start|>`, 260 `<|im_end|>` (CONTROL, EOS = `<|im_end|>`), then 251 NORMAL
 *   pieces: `▁` (U+2581, SentencePiece's space), the 94 printable ASCII characters and `▁`+common
 *   English words WITH ALL THEIR PREFIXES (`▁t`, `▁th`, `▁the`): llama.cpp's SPM tokenizer merges two
 *   adjacent symbols only if the result is in the vocab, so a word without its prefix chain would
 *   never be produced. Scores favour longer pieces. Result: WORDS below are one token each (a prompt
 *   of N such words ≈ N tokens); other text falls back to characters, anything else to UTF-8 bytes.
 * - "biased" output layer: llama has no output bias tensor, so the bias is built into the weights.
 *   Every token embedding carries a large constant (1.0) in dimension 0 while the other dimensions
 *   are small noise, and the blocks' output projections are small, so after the final RMSNorm
 *   dimension 0 is always ~+14. `output.weight` has +0.5 in dimension 0 for NORMAL pieces and -2
 *   for bytes and control tokens, which puts byte/control tokens ~35 nats behind: sampling yields
 *   plain printable text (never invalid UTF-8, which would make llama-server answer HTTP 500) and
 *   never EOS, so generation always runs to `max_tokens`.
 * - chat template: ChatML (`<|im_start|>role\n...<|im_end|>\n`) in the Qwen2.5 style, which also
 *   renders a `tools` list, assistant `tool_calls` and `tool` messages (Hermes `<tool_call>` tags).
 *
 * Also exported: `makeGguf(options)` returning the bytes, and `writeGguf(path, options)`.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { seededRandom } from "../../src/core/random.ts";

export interface GgufOptions {
  /** PRNG seed for the weights; same seed → byte-identical file. Default 42. */
  seed?: number;
  /** Transformer blocks. Default 3. */
  layers?: number;
  /** Embedding width. Default 256. */
  embd?: number;
  /** FFN width. Default 512. */
  ff?: number;
  /** Attention heads (head dim = embd / heads). Default 4. */
  heads?: number;
  /** Training context written to the metadata. Default 8192. */
  contextLength?: number;
}

/** The ChatML template (Qwen2.5 style, with tool support) stored in `tokenizer.chat_template`. */
export const CHATML_TEMPLATE = [
  "{%- if tools %}",
  "{{- '<|im_start|>system\\n' }}",
  "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}",
  '{{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}',
  '{%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}',
  '{{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}',
  "{%- else %}",
  "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- endif %}",
  "{%- endif %}",
  "{%- for message in messages %}",
  '{%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}',
  "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}",
  '{%- elif message.role == "assistant" %}',
  "{{- '<|im_start|>' + message.role }}",
  "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}",
  "{%- for tool_call in message.tool_calls %}",
  "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}",
  "{{- '\\n<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}{{- '\", \"arguments\": ' }}{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}",
  "{%- endfor %}",
  "{{- '<|im_end|>\\n' }}",
  '{%- elif message.role == "tool" %}',
  "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}{{- '<|im_start|>user' }}{%- endif %}",
  "{{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}",
  "{%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}{{- '<|im_end|>\\n' }}{%- endif %}",
  "{%- endif %}",
  "{%- endfor %}",
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
].join("\n");

const VOCAB_SIZE = 512;
// SentencePiece token types (llama_token_type)
const TT_NORMAL = 1;
const TT_UNKNOWN = 2;
const TT_CONTROL = 3;
const TT_BYTE = 6;

const SPACE = "\u2581";
/** Words that become single tokens, most useful first (prefix chains are added while they fit). */
export const WORDS = (
  "the cache token prompt server model request slot user system hello world data node route warm path " +
  "of and to in is you that it he was for on are as with at be this have from or one had by but not " +
  "what all we can if up out so no my"
).split(" ");
export interface Vocab {
  tokens: string[];
  scores: number[];
  types: number[];
  imStart: number;
  imEnd: number;
}

export function buildVocab(): Vocab {
  const tokens: string[] = ["<unk>", "<s>", "</s>"];
  const types: number[] = [TT_UNKNOWN, TT_CONTROL, TT_CONTROL];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(TT_BYTE);
  }
  const imStart = tokens.length;
  tokens.push("<|im_start|>");
  types.push(TT_CONTROL);
  const imEnd = tokens.length;
  tokens.push("<|im_end|>");
  types.push(TT_CONTROL);

  const normal: string[] = [SPACE];
  for (let c = 0x21; c < 0x7f; c++) normal.push(String.fromCharCode(c));
  // llama.cpp's SPM tokenizer only merges two adjacent symbols if the result is a vocab entry, so a
  // word is reachable only if every prefix of "▁word" is in the vocab: add whole prefix chains.
  const seen = new Set([...tokens, ...normal]);
  const budget = VOCAB_SIZE - tokens.length;
  for (const w of WORDS) {
    const chain: string[] = [];
    for (let n = 1; n <= w.length; n++) {
      const piece = SPACE + w.slice(0, n);
      if (!seen.has(piece) && !chain.includes(piece)) chain.push(piece);
    }
    if (normal.length + chain.length > budget) continue;
    for (const piece of chain) {
      normal.push(piece);
      seen.add(piece);
    }
  }
  // fill any remaining entries with "▁" + single characters (each is its own complete chain)
  for (let c = 0x21; c < 0x7f && normal.length < budget; c++) {
    const piece = SPACE + String.fromCharCode(c);
    if (!seen.has(piece)) {
      normal.push(piece);
      seen.add(piece);
    }
  }
  for (const p of normal) {
    tokens.push(p);
    types.push(TT_NORMAL);
  }
  if (tokens.length !== VOCAB_SIZE) throw new Error(`vocab has ${tokens.length} tokens, want ${VOCAB_SIZE}`);
  // SPM merges the adjacent pair whose result has the highest score: prefer longer pieces.
  const scores = tokens.map((t, i) => (types[i] === TT_NORMAL ? [...t].length * 10 - i * 0.001 : 0));
  return { tokens, scores, types, imStart, imEnd };
}

// ---- GGUF writer -------------------------------------------------------------------------------

const GGUF_TYPE = { U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9 } as const;
const GGML_TYPE_F32 = 0;
const ALIGNMENT = 32;

type KvValue =
  | { t: "u32"; v: number }
  | { t: "f32"; v: number }
  | { t: "bool"; v: boolean }
  | { t: "str"; v: string }
  | { t: "strs"; v: string[] }
  | { t: "f32s"; v: number[] }
  | { t: "i32s"; v: number[] };

class Writer {
  private chunks: Buffer[] = [];
  size = 0;
  push(b: Buffer): void {
    this.chunks.push(b);
    this.size += b.length;
  }
  u32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.push(b);
  }
  i32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.push(b);
  }
  u64(v: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  f32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.push(b);
  }
  str(s: string): void {
    const b = Buffer.from(s, "utf8");
    this.u64(b.length);
    this.push(b);
  }
  pad(): void {
    const rem = this.size % ALIGNMENT;
    if (rem) this.push(Buffer.alloc(ALIGNMENT - rem));
  }
  result(): Buffer {
    return Buffer.concat(this.chunks, this.size);
  }
}

function writeKv(w: Writer, key: string, val: KvValue): void {
  w.str(key);
  switch (val.t) {
    case "u32":
      w.u32(GGUF_TYPE.U32);
      w.u32(val.v);
      break;
    case "f32":
      w.u32(GGUF_TYPE.F32);
      w.f32(val.v);
      break;
    case "bool":
      w.u32(GGUF_TYPE.BOOL);
      w.push(Buffer.from([val.v ? 1 : 0]));
      break;
    case "str":
      w.u32(GGUF_TYPE.STRING);
      w.str(val.v);
      break;
    case "strs":
      w.u32(GGUF_TYPE.ARRAY);
      w.u32(GGUF_TYPE.STRING);
      w.u64(val.v.length);
      for (const s of val.v) w.str(s);
      break;
    case "f32s":
      w.u32(GGUF_TYPE.ARRAY);
      w.u32(GGUF_TYPE.F32);
      w.u64(val.v.length);
      for (const x of val.v) w.f32(x);
      break;
    case "i32s":
      w.u32(GGUF_TYPE.ARRAY);
      w.u32(GGUF_TYPE.I32);
      w.u64(val.v.length);
      for (const x of val.v) w.i32(x);
      break;
  }
}

interface Tensor {
  name: string;
  /** GGML order: ne[0] is the contiguous (row) dimension. */
  dims: number[];
  data: Float32Array;
}

/** Builds the GGUF file in memory. Deterministic for a given set of options. */
export function makeGguf(options: GgufOptions = {}): Buffer {
  const seed = options.seed ?? 42;
  const nLayer = options.layers ?? 3;
  const nEmbd = options.embd ?? 256;
  const nFf = options.ff ?? 512;
  const nHead = options.heads ?? 4;
  const nCtx = options.contextLength ?? 8192;
  if (nEmbd % nHead !== 0) throw new Error("embd must be a multiple of heads");
  const vocab = buildVocab();
  const nVocab = vocab.tokens.length;
  const rand = seededRandom(seed);
  const uniform = (n: number, scale: number): Float32Array => {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = (rand() * 2 - 1) * scale;
    return a;
  };
  const ones = (n: number): Float32Array => new Float32Array(n).fill(1);

  const tensors: Tensor[] = [];
  // token embeddings: constant 1.0 in dim 0 (the "bias" carrier), small noise elsewhere
  const embd = uniform(nEmbd * nVocab, 0.05);
  for (let t = 0; t < nVocab; t++) embd[t * nEmbd] = 1;
  tensors.push({ name: "token_embd.weight", dims: [nEmbd, nVocab], data: embd });
  tensors.push({ name: "output_norm.weight", dims: [nEmbd], data: ones(nEmbd) });
  // output: dim 0 decides the token class, the other dims give random variety between NORMAL pieces
  const out = uniform(nEmbd * nVocab, 0.5);
  for (let t = 0; t < nVocab; t++) out[t * nEmbd] = vocab.types[t] === TT_NORMAL ? 0.5 : -2;
  tensors.push({ name: "output.weight", dims: [nEmbd, nVocab], data: out });
  const proj = 1 / Math.sqrt(nEmbd);
  for (let i = 0; i < nLayer; i++) {
    const p = `blk.${i}.`;
    tensors.push({ name: p + "attn_norm.weight", dims: [nEmbd], data: ones(nEmbd) });
    tensors.push({ name: p + "attn_q.weight", dims: [nEmbd, nEmbd], data: uniform(nEmbd * nEmbd, proj) });
    tensors.push({ name: p + "attn_k.weight", dims: [nEmbd, nEmbd], data: uniform(nEmbd * nEmbd, proj) });
    tensors.push({ name: p + "attn_v.weight", dims: [nEmbd, nEmbd], data: uniform(nEmbd * nEmbd, proj) });
    // small output projections keep the residual stream dominated by the embedding (see header)
    tensors.push({ name: p + "attn_output.weight", dims: [nEmbd, nEmbd], data: uniform(nEmbd * nEmbd, 0.01) });
    tensors.push({ name: p + "ffn_norm.weight", dims: [nEmbd], data: ones(nEmbd) });
    tensors.push({ name: p + "ffn_gate.weight", dims: [nEmbd, nFf], data: uniform(nEmbd * nFf, proj) });
    tensors.push({ name: p + "ffn_up.weight", dims: [nEmbd, nFf], data: uniform(nEmbd * nFf, proj) });
    tensors.push({ name: p + "ffn_down.weight", dims: [nFf, nEmbd], data: uniform(nFf * nEmbd, 0.01) });
  }

  const kv: [string, KvValue][] = [
    ["general.architecture", { t: "str", v: "llama" }],
    ["general.name", { t: "str", v: "warmpath-tiny-random" }],
    ["general.file_type", { t: "u32", v: 0 }], // ALL_F32
    ["general.alignment", { t: "u32", v: ALIGNMENT }],
    ["llama.context_length", { t: "u32", v: nCtx }],
    ["llama.embedding_length", { t: "u32", v: nEmbd }],
    ["llama.block_count", { t: "u32", v: nLayer }],
    ["llama.feed_forward_length", { t: "u32", v: nFf }],
    ["llama.attention.head_count", { t: "u32", v: nHead }],
    ["llama.attention.head_count_kv", { t: "u32", v: nHead }],
    ["llama.rope.dimension_count", { t: "u32", v: nEmbd / nHead }],
    ["llama.rope.freq_base", { t: "f32", v: 10000 }],
    ["llama.attention.layer_norm_rms_epsilon", { t: "f32", v: 1e-5 }],
    ["llama.vocab_size", { t: "u32", v: nVocab }],
    ["tokenizer.ggml.model", { t: "str", v: "llama" }],
    ["tokenizer.ggml.tokens", { t: "strs", v: vocab.tokens }],
    ["tokenizer.ggml.scores", { t: "f32s", v: vocab.scores }],
    ["tokenizer.ggml.token_type", { t: "i32s", v: vocab.types }],
    ["tokenizer.ggml.unknown_token_id", { t: "u32", v: 0 }],
    ["tokenizer.ggml.bos_token_id", { t: "u32", v: 1 }],
    ["tokenizer.ggml.eos_token_id", { t: "u32", v: vocab.imEnd }],
    ["tokenizer.ggml.padding_token_id", { t: "u32", v: 0 }],
    ["tokenizer.ggml.add_bos_token", { t: "bool", v: false }],
    ["tokenizer.ggml.add_eos_token", { t: "bool", v: false }],
    ["tokenizer.chat_template", { t: "str", v: CHATML_TEMPLATE }],
  ];

  const w = new Writer();
  w.push(Buffer.from("GGUF", "ascii"));
  w.u32(3); // version
  w.u64(tensors.length);
  w.u64(kv.length);
  for (const [k, v] of kv) writeKv(w, k, v);
  let offset = 0;
  for (const t of tensors) {
    w.str(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(GGML_TYPE_F32);
    w.u64(offset);
    const bytes = t.data.length * 4;
    offset += Math.ceil(bytes / ALIGNMENT) * ALIGNMENT;
  }
  w.pad();
  for (const t of tensors) {
    const b = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    w.push(Buffer.from(b)); // little-endian on x64/arm64
    w.pad();
  }
  return w.result();
}

/** Writes the model to `path` (directories created) and returns its size in bytes. */
export function writeGguf(path: string, options: GgufOptions = {}): number {
  const buf = makeGguf(options);
  mkdirSync(dirname(resolve(path)), { recursive: true });
  writeFileSync(path, buf);
  return buf.length;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      out: { type: "string" },
      seed: { type: "string" },
      layers: { type: "string" },
    },
  });
  if (!values.out) {
    console.error("usage: node scripts/llama/make-gguf.ts --out <file.gguf> [--seed N] [--layers N]");
    process.exit(2);
  }
  const opts: GgufOptions = {};
  if (values.seed) opts.seed = Number(values.seed);
  if (values.layers) opts.layers = Number(values.layers);
  const size = writeGguf(values.out, opts);
  console.log(`wrote ${values.out} (${(size / 1e6).toFixed(2)} MB)`);
}
