/**
 * warmpath-agent's engine modules (agent/engines/): load, KV capacity and detection,
 * read from fixtures written from each engine's source (agent/test/fixtures/README.md
 * says which version each represents).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { detectEngine } from "../engines/detect.ts";
import { capacityFromProps, llamacpp } from "../engines/llamacpp.ts";
import { sglang } from "../engines/sglang.ts";
import type { EngineScrape } from "../engines/types.ts";
import { vllm } from "../engines/vllm.ts";
import { parsePrometheus } from "../prometheus.ts";
import { modelIds } from "../scrape.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");
const fixture = (name: string) => readFileSync(join(FIXTURES, name), "utf8");
const page = (text: string, extra: Partial<EngineScrape> = {}): EngineScrape => ({ samples: parsePrometheus(text), headers: {}, ...extra });

test("vLLM 0.10: load, and capacity from block_size x num_gpu_blocks", () => {
  const p = page(fixture("vllm-0.10-metrics.txt"));
  assert.equal(detectEngine(p.samples).name, "vllm");
  assert.deepEqual(vllm.readLoad(p), { running: 7, waiting: 2, kvUsage: 0.4375 });
  assert.deepEqual(vllm.readCapacity(p), { tokens: 16 * 29837, source: "vllm:cache_config_info (block_size x num_gpu_blocks)" });
});

test("vLLM with data-parallel engines: load summed, usage averaged, capacity from kv_cache_size_tokens per engine", () => {
  const p = page(fixture("vllm-recent-metrics.txt"));
  assert.deepEqual(vllm.readLoad(p), { running: 7, waiting: 5, kvUsage: 0.5 });
  // The group-aware label wins over 832 x 745 = 619840 (a hybrid model), and each engine has its own cache.
  assert.deepEqual(vllm.readCapacity(p), { tokens: 2 * 619479, source: "vllm:cache_config_info (kv_cache_size_tokens, 2 engines)" });
});

test("vLLM before kv_cache_usage_perc: the usage comes from gpu_cache_usage_perc", () => {
  const p = page('vllm:num_requests_running{model_name="m"} 1.0\nvllm:gpu_cache_usage_perc{model_name="m"} 0.9\n');
  assert.deepEqual(vllm.readLoad(p), { running: 1, waiting: 0, kvUsage: 0.9 });
});

test("vLLM capacity: a num_gpu_blocks of None (not profiled yet) is no capacity", () => {
  const p = page('vllm:cache_config_info{block_size="16",kv_cache_size_tokens="None",num_gpu_blocks="None"} 1.0\n');
  assert.equal(vllm.readCapacity(p), undefined);
});

test("SGLang: load, usage and capacity from sglang:max_total_num_tokens", () => {
  const p = page(fixture("sglang-metrics.txt"));
  assert.equal(detectEngine(p.samples).name, "sglang");
  assert.deepEqual(sglang.readLoad(p), { running: 12, waiting: 3, kvUsage: 0.31 });
  assert.deepEqual(sglang.readCapacity(p), { tokens: 311328, source: "sglang:max_total_num_tokens" });
});

test("SGLang with two data-parallel replicas and every scheduler exporting: each replica counted once", () => {
  const lines = [];
  for (const dp of [0, 1]) {
    for (const tp of [0, 1]) {
      const l = `dp_rank="${dp}",engine_type="unified",model_name="m",pp_rank="0",tp_rank="${tp}"`;
      lines.push(`sglang:num_running_reqs{${l}} ${dp === 0 ? 5 : 7}.0`, `sglang:num_queue_reqs{${l}} 1.0`);
      lines.push(`sglang:num_used_tokens{${l}} ${dp === 0 ? 1000 : 3000}.0`, `sglang:max_total_num_tokens{${l}} 10000.0`);
    }
  }
  const p = page(lines.join("\n"));
  // No sglang:token_usage on this page: used / pool over both replicas.
  assert.deepEqual(sglang.readLoad(p), { running: 12, waiting: 2, kvUsage: 0.2 });
  assert.equal(sglang.readCapacity(p)?.tokens, 20000);
});

test("SGLang without sglang:max_total_num_tokens (older servers): no capacity", () => {
  assert.equal(sglang.readCapacity(page("sglang:num_running_reqs 1\n")), undefined);
});

test("llama.cpp: load from requests_processing / requests_deferred, no KV usage metric in current servers", () => {
  const p = page(fixture("llamacpp-metrics.txt"));
  assert.equal(detectEngine(p.samples).name, "llamacpp");
  assert.deepEqual(llamacpp.readLoad(p), { running: 3, waiting: 1, kvUsage: 0 });
  // Older servers also wrote the ratio: read when present.
  assert.equal(llamacpp.readLoad(page("llamacpp:requests_processing 1\nllamacpp:kv_cache_usage_ratio 0.625\n")).kvUsage, 0.625);
});

test("llama.cpp capacity: one slot's n_ctx from /props (exact for the unified cache), never n_ctx x slots", () => {
  const props = JSON.parse(fixture("llamacpp-props.json")) as unknown;
  const p = page(fixture("llamacpp-metrics.txt"), { props });
  assert.deepEqual(llamacpp.readCapacity(p), {
    tokens: 32768,
    source: "/props default_generation_settings.n_ctx (one slot's context, 4 slots)",
  });
  assert.equal(capacityFromProps({ total_slots: 4 }), undefined);
  assert.equal(capacityFromProps({ default_generation_settings: { n_ctx: 0 } }), undefined);
  assert.equal(capacityFromProps(undefined), undefined);
  assert.equal(llamacpp.readCapacity(page(fixture("llamacpp-metrics.txt"))), undefined);
});

test("model lists: every engine's GET /v1/models", () => {
  assert.deepEqual(modelIds(JSON.parse(fixture("vllm-models.json"))), ["meta-llama/Llama-3.1-8B-Instruct", "sql-lora"]);
  assert.deepEqual(modelIds(JSON.parse(fixture("sglang-models.json"))), ["Qwen/Qwen2.5-7B-Instruct"]);
  assert.deepEqual(modelIds(JSON.parse(fixture("llamacpp-models.json"))), ["qwen2.5-7b-instruct"]);
  assert.throws(() => modelIds({ data: [] }), /no model ids/);
  assert.throws(() => modelIds({ error: "x" }), /no model ids/);
});

test("detection: refuses a page with no engine's metrics, or several engines', naming what to do", () => {
  assert.throws(() => detectEngine(parsePrometheus("up 1\nprocess_start_time_seconds 1\n")), /enable-metrics.*--metrics.*--engine/);
  assert.throws(() => detectEngine(parsePrometheus("vllm:num_requests_running 1\nsglang:num_running_reqs 1\n")), /several engines/);
});

test("an engine's page without its load metrics is an error, not an idle node", () => {
  assert.throws(() => vllm.readLoad(page("vllm:cache_config_info 1\n")), /no vllm:num_requests_running/);
  assert.throws(() => sglang.readLoad(page("sglang:token_usage 0.1\n")), /no sglang:num_running_reqs/);
  assert.throws(() => llamacpp.readLoad(page("llamacpp:prompt_tokens_total 5\n")), /no llamacpp:requests_processing/);
});

test("counts are clamped to non-negative integers and usage to 0..1", () => {
  const p = page('vllm:num_requests_running{engine="0"} 2.6\nvllm:num_requests_waiting{engine="0"} -1\nvllm:kv_cache_usage_perc 1.7\n');
  assert.deepEqual(vllm.readLoad(p), { running: 3, waiting: 0, kvUsage: 1 });
});

// Real llama-server outputs (build b1-5b4ebc5), copied from scripts/llama/recorded/.

test("llama.cpp, recorded: idle and busy load, capacity from the real /props, model from the real /v1/models", () => {
  assert.equal(detectEngine(page(fixture("llamacpp-recorded-metrics.txt")).samples).name, "llamacpp");
  assert.deepEqual(llamacpp.readLoad(page(fixture("llamacpp-recorded-metrics.txt"))), { running: 0, waiting: 0, kvUsage: 0 });
  // One request running, one deferred (waiting for the single slot): experiments.json "busy".
  assert.deepEqual(llamacpp.readLoad(page(fixture("llamacpp-recorded-metrics-busy.txt"))), { running: 1, waiting: 1, kvUsage: 0 });
  const props = JSON.parse(fixture("llamacpp-recorded-props.json")) as unknown;
  assert.equal(llamacpp.readCapacity(page("", { props }))?.tokens, 8192);
  assert.deepEqual(modelIds(JSON.parse(fixture("llamacpp-recorded-models.json"))), ["tiny"]);
});

test("llama.cpp, recorded: a slot's n_ctx is the whole cache with one slot or a unified cache, a share of it when split", () => {
  const x = JSON.parse(fixture("llamacpp-recorded-experiments-excerpt.json")) as {
    slotsNctx: Record<string, { argv: string; slotsNctx: number[] }>;
  };
  // -c 8192 everywhere: what the agent reports (one slot's n_ctx) is 8192 except for the split cache.
  assert.deepEqual(x.slotsNctx.np1_cacheRam0?.slotsNctx, [8192]);
  assert.deepEqual(x.slotsNctx.np3_kvUnified_cacheRam0?.slotsNctx, [8192, 8192, 8192]);
  assert.deepEqual(x.slotsNctx.np3_cacheRam0?.slotsNctx, [2816, 2816, 2816]);
  const slots = JSON.parse(fixture("llamacpp-recorded-slots.json")) as Array<{ n_ctx: number }>;
  assert.equal(slots[0]?.n_ctx, 8192);
});
