/**
 * The fleet file: regions, their router-facing node token, and nodes with their hardware model.
 * Validated with zod; every error names the offending field, e.g.
 * `regions[0].nodes[2].kv_capacity_tokens: Invalid input: expected number, received string`.
 * A top-level `defaults` object gives node fields once for every node; a node can override any.
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { MAX_RUNNING_REPORTED } from "../agent/args.ts";

export const FaultsSchema = z.strictObject({
  /** Fraction of inference requests answered 500 before any byte, 0..1. */
  error_rate: z.number().min(0).max(1),
  /** Wall milliseconds added before an inference request is handled (not time-scaled). */
  extra_latency_ms: z.number().min(0),
  /** Accept requests and never answer (admin endpoints still answer). */
  hang: z.boolean(),
  /**
   * A streamed answer sends this many tokens, then goes silent: the stream is never ended (the
   * socket stays open until the client goes or the node crashes). null: off.
   */
  hang_after_tokens: z.number().int().min(1).nullable(),
  /**
   * A streamed answer sends this many tokens, then the node's connection is reset (TCP RST, no
   * `data: [DONE]`, no end of the chunked body), as when its process crashes. null: off.
   */
  die_after_tokens: z.number().int().min(1).nullable(),
  /**
   * A streamed answer sends this many tokens, then vLLM's mid-stream error event
   * (`data: {"error": {..., "type": "InternalServerError", "code": 500}}`), then `data: [DONE]`, and
   * ends. null: off.
   */
  error_event_after_tokens: z.number().int().min(1).nullable(),
  /** A streamed answer sends this many tokens, then a `data:` line that is not JSON, then ends. null: off. */
  malformed_after_tokens: z.number().int().min(1).nullable(),
  /** Answer inference requests 307 with this Location (a URL the client must never see). null: off. */
  redirect_to: z.url({ protocol: /^https?$/ }).nullable(),
  /** Prefill takes this many times as long as the node's prefill rate says (1: normal). */
  prefill_slowdown: z.number().min(1),
});
export type Faults = z.infer<typeof FaultsSchema>;
export const NO_FAULTS: Faults = {
  error_rate: 0,
  extra_latency_ms: 0,
  hang: false,
  hang_after_tokens: null,
  die_after_tokens: null,
  error_event_after_tokens: null,
  malformed_after_tokens: null,
  redirect_to: null,
  prefill_slowdown: 1,
};

/**
 * The inference engine a node says it runs, in its load reports (the router continues an
 * interrupted stream only on engines that can continue a final assistant message). The simulator
 * behaves the same whatever it says: vLLM's request and response shapes.
 */
export const NODE_ENGINES = ["vllm", "sglang", "llama.cpp", "other"] as const;
export type NodeEngine = (typeof NODE_ENGINES)[number];

const NodeFields = {
  engine: z.enum(NODE_ENGINES),
  models: z.array(z.string().min(1)).min(1),
  kv_capacity_tokens: z.number().int().min(16),
  prefill_tokens_per_second: z.number().positive(),
  decode_tokens_per_second: z.number().positive(),
  // The router's bound on a reported max_running_requests, as the agent holds it: a node the router would refuse is a config error.
  max_running: z.number().int().min(1).max(MAX_RUNNING_REPORTED),
  /**
   * Say `max_running` in its load reports (`max_running_requests`), as warmpath-agent
   * `--max-running` or llama-server's `/props` does, so the router counts the wait for a place.
   * Off by default: a vLLM agent not told its `--max-num-seqs`, what the benchmarks measured.
   */
  report_max_running: z.boolean(),
  time_factor: z.number().positive(),
  /** Answer length when the request sets no smaller max_tokens. */
  default_max_tokens: z.number().int().min(1),
  /** Stream the usage chunk even when the client did not ask (vLLM's --enable-force-include-usage). */
  force_include_usage: z.boolean(),
  /** How often the node pushes a load report to the router (wall ms, not time-scaled). */
  report_interval_ms: z.number().int().min(50),
  faults: FaultsSchema.partial(),
};

export const NODE_DEFAULTS = {
  engine: "vllm" as NodeEngine,
  models: ["llama-3.1-8b-instruct"],
  kv_capacity_tokens: 200_000,
  prefill_tokens_per_second: 5_000,
  decode_tokens_per_second: 30,
  max_running: 64,
  report_max_running: false,
  time_factor: 1,
  default_max_tokens: 64,
  force_include_usage: false,
  report_interval_ms: 1_000,
  faults: {},
};

const NodeSchema = z.strictObject({
  // The router's node_id rule (src/edge/api/nodes.ts), restated: a node it would reject is a config error.
  id: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "must be lowercase letters, digits and dashes (max 63)"),
  port: z.number().int().min(0).max(65535).default(0),
  ...z.object(NodeFields).partial().shape,
});

const RegionSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9._-]+$/, "letters, digits, '.', '_' or '-' only"),
  /** Bearer token the region's router expects on node reports; CLI/env can override. */
  token: z.string().min(1).optional(),
  nodes: z.array(NodeSchema).min(1),
});

const FleetSchema = z.strictObject({
  $schema: z.string().optional(),
  description: z.string().optional(),
  defaults: z.strictObject(NodeFields).partial().optional(),
  regions: z.array(RegionSchema).min(1),
});

/** A node with every field resolved. */
export interface NodeConfig {
  id: string;
  region: string;
  port: number;
  engine: NodeEngine;
  models: string[];
  kv_capacity_tokens: number;
  prefill_tokens_per_second: number;
  decode_tokens_per_second: number;
  max_running: number;
  report_max_running: boolean;
  time_factor: number;
  default_max_tokens: number;
  force_include_usage: boolean;
  report_interval_ms: number;
  faults: Faults;
}

export interface RegionConfig {
  name: string;
  token: string | undefined;
  nodes: NodeConfig[];
}

export interface FleetConfig {
  regions: RegionConfig[];
}

export class ConfigError extends Error {}

function formatIssues(source: string, error: z.ZodError): string {
  const lines = error.issues.map((i) => {
    const path = i.path.map((p, k) => (typeof p === "number" ? `[${p}]` : (k === 0 ? "" : ".") + String(p))).join("");
    return `  ${path || "(root)"}: ${i.message}`;
  });
  return `invalid fleet file ${source}:\n${lines.join("\n")}`;
}

/** Validates a parsed fleet file and resolves defaults. Throws ConfigError naming bad fields. */
export function parseFleet(raw: unknown, source = "(inline)"): FleetConfig {
  const parsed = FleetSchema.safeParse(raw);
  if (!parsed.success) throw new ConfigError(formatIssues(source, parsed.error));
  const f = parsed.data;
  const regions: RegionConfig[] = [];
  const regionNames = new Set<string>();
  const ports = new Map<number, string>();
  f.regions.forEach((r, ri) => {
    if (regionNames.has(r.name))
      throw new ConfigError(`invalid fleet file ${source}:\n  regions[${ri}].name: duplicate region "${r.name}"`);
    regionNames.add(r.name);
    const ids = new Set<string>();
    const nodes = r.nodes.map((n, ni): NodeConfig => {
      const where = `regions[${ri}].nodes[${ni}]`;
      if (ids.has(n.id))
        throw new ConfigError(`invalid fleet file ${source}:\n  ${where}.id: duplicate node id "${n.id}" in region ${r.name}`);
      ids.add(n.id);
      if (n.port !== 0) {
        const other = ports.get(n.port);
        if (other) throw new ConfigError(`invalid fleet file ${source}:\n  ${where}.port: port ${n.port} is also used by ${other}`);
        ports.set(n.port, `${r.name}/${n.id}`);
      }
      const merged = { ...NODE_DEFAULTS, ...f.defaults, ...n };
      return {
        ...merged,
        region: r.name,
        id: n.id,
        port: n.port,
        faults: { ...NO_FAULTS, ...f.defaults?.faults, ...n.faults },
      };
    });
    regions.push({ name: r.name, token: r.token, nodes });
  });
  return { regions };
}

/** Reads and validates a fleet file. */
export function loadFleet(path: string): FleetConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError(`cannot read fleet file ${path}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`fleet file ${path} is not valid JSON: ${(err as Error).message}`);
  }
  return parseFleet(raw, path);
}
