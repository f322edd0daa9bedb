/**
 * Runs CompatCanary (npm `compatcanary`, an independent scanner of OpenAI-style APIs; pinned in
 * package.json) against one endpoint, as a user would: its own CLI in a process of its own, JSON
 * report on stdout (`--format json`, schema `compatcanary.report.v1`), `--fail-on never` so that a
 * failing probe is a result to compare rather than an exit code. It needs no network beyond the
 * endpoint: every probe is a request to `--base-url`.
 *
 * The API key goes through an environment variable (`--api-key-env`), never the command line
 * (CompatCanary's own advice: arguments show in process listings).
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { z } from "zod";
import { ROOT } from "../system.ts";

export const CANARY_CLI = join(ROOT, "node_modules", "compatcanary", "src", "cli.js");
/** The variable the key is handed over in (not OPENAI_API_KEY, so a developer's own key is never sent to a local endpoint). */
const KEY_ENV = "COMPAT_TARGET_API_KEY";
/**
 * Seconds CompatCanary waits for one probe's answer. Its default is 30; a streamed answer of the
 * simulated fleet takes ~2 s at time factor 1 and llama-server's tiny model ~1 s, so 30 is only
 * reached by a stuck endpoint, which then fails its probe (a result) rather than hanging the run.
 */
export const PROBE_TIMEOUT_S = 30;

/** One probe's outcome (CompatCanary's docs/REPORT-SCHEMA.md: unknown fields are ignored). */
export const probeResultSchema = z.object({
  id: z.string(),
  name: z.string(),
  category: z.string(),
  required: z.boolean(),
  weight: z.number(),
  status: z.enum(["pass", "warn", "fail"]),
  summary: z.string(),
  evidence: z.record(z.string(), z.unknown()).optional(),
  error: z.object({ message: z.string(), httpStatus: z.number().optional(), responseBody: z.string().optional() }).optional(),
  durationMs: z.number(),
});
export type ProbeResult = z.infer<typeof probeResultSchema>;

export const canaryReportSchema = z.object({
  schemaVersion: z.literal("compatcanary.report.v1"),
  scanner: z.object({ name: z.literal("compatcanary"), version: z.string() }),
  target: z.object({ baseUrl: z.string(), model: z.string(), profile: z.string() }),
  score: z.number(),
  compatible: z.boolean(),
  summary: z.object({ passes: z.number(), warnings: z.number(), failures: z.number(), requiredFailures: z.number(), total: z.number() }),
  results: z.array(probeResultSchema),
});
export type CanaryReport = z.infer<typeof canaryReportSchema>;

export interface CanaryTarget {
  /** The OpenAI base URL, ending in /v1. */
  baseUrl: string;
  model: string;
  apiKey?: string;
}

/** CompatCanary's `modern` profile (chat and the Responses API) against `target`; rejects only if the scanner itself failed. */
export async function runCanary(target: CanaryTarget): Promise<CanaryReport> {
  const args = [CANARY_CLI, "scan", "--base-url", target.baseUrl, "--model", target.model, "--profile", "modern"];
  args.push("--format", "json", "--fail-on", "never", "--timeout", String(PROBE_TIMEOUT_S), "--api-key-env", KEY_ENV);
  const env: NodeJS.ProcessEnv = { ...process.env, [KEY_ENV]: target.apiKey ?? "" };
  // CompatCanary reads these as defaults; the command line says everything, so none may leak in.
  for (const name of ["OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY", "COMPATCANARY_PROFILE"]) delete env[name];
  const child = spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (c) => resolve(c));
  });
  if (code !== 0) throw new Error(`compatcanary exited ${code} against ${target.baseUrl}: ${stderr.trim() || stdout.trim()}`);
  return canaryReportSchema.parse(JSON.parse(stdout));
}
