/**
 * llama.cpp's llama-server, from its Prometheus `/metrics` (the server needs `--metrics`) and
 * `GET /props`.
 *
 * As read in ggml-org/llama.cpp tools/server/server-context.cpp
 * @ fb4026604c67c682f552337ec9b91eced0abd35a (`get_metrics`, `get_props`, `get_models`):
 * - `/metrics` writes every metric unlabelled, `llamacpp:<name> <value>`, the value through a
 *   C++ stream (6 significant digits: `1.23457e+06`). Counters `llamacpp:prompt_tokens_total`,
 *   `llamacpp:prompt_seconds_total`, `llamacpp:tokens_predicted_total`,
 *   `llamacpp:tokens_predicted_seconds_total`, `llamacpp:n_decode_total`, `llamacpp:n_tokens_max`,
 *   `llamacpp:n_busy_slots_per_decode`; gauges `llamacpp:prompt_tokens_seconds`,
 *   `llamacpp:predicted_tokens_seconds`, `llamacpp:requests_processing` (slots busy) and
 *   `llamacpp:requests_deferred` (tasks waiting for a slot). Its response carries a
 *   `Process-Start-Time-Unix` header: the metrics' `t_start`, set once per process
 *   (`ggml_time_us()` at start), so a new value is a new process.
 * - No KV usage metric any more: older servers (examples/server/server.cpp, before the KV-cache
 *   API rework) also wrote `llamacpp:kv_cache_usage_ratio` (used cells / n_ctx) and
 *   `llamacpp:kv_cache_tokens`; the ratio is read when present, else the usage is reported as 0
 *   (unknown, which the router treats as no KV pressure).
 * - `/props` (always served): `total_slots` (`n_parallel`) and
 *   `default_generation_settings.n_ctx`, the context of one slot (`get_slot_n_ctx()`).
 * - `/v1/models`: one model, `data[0].id` = the model alias, else its path.
 *
 * KV capacity. The server's KV cache holds `-c` cells in all. How a slot's `n_ctx` relates to it
 * depends on the layout (ggml-org/llama.cpp#16736, #17997): with the unified cache (the default
 * since late 2025 when `-np` is not given: 4 slots sharing one buffer) every slot may use the
 * whole cache, so a slot's `n_ctx` IS the capacity, and `n_ctx x slots` would overstate it 4x;
 * with a split cache (older servers, or an explicit `-np N` without `--kv-unified`) each slot has
 * `-c / N`, and the capacity is `n_ctx x N`. Recorded on a real llama-server (build b1-5b4ebc5,
 * agent/test/fixtures/llamacpp-recorded-experiments-excerpt.json): `-c 8192 -np 1` gives
 * slots of 8192, `-c 8192 -np 3` three of 2816, `-c 8192 -np 3 --kv-unified` three of 8192; the
 * same build writes `llamacpp:prompt_tokens_cached_total` and speculative-decoding counters too,
 * and its counters restart from 0 with the process. `/props` does not say which layout. The agent reports one
 * slot's `n_ctx`: exact for both defaults (unified, and the old single slot), and an understatement
 * otherwise. Understating is the safe side: the router's index then forgets blocks early (fewer
 * predicted hits), whereas overstating makes it trust evicted prefixes and take ordinary evictions
 * for cache losses. With `-np N` and a split cache, pass `--kv-capacity-tokens` = the server's `-c`.
 */
import { series } from "../prometheus.ts";
import { count, positiveInt, ratio, type Capacity, type Engine, type EngineScrape } from "./types.ts";

export const LLAMACPP_METRICS = {
  running: "llamacpp:requests_processing",
  waiting: "llamacpp:requests_deferred",
  kvUsage: "llamacpp:kv_cache_usage_ratio",
  restartCounters: ["llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "llamacpp:n_decode_total"],
} as const;

/** Response header of `/metrics` naming the process start (lower-case, as node:http gives it). */
export const LLAMACPP_START_HEADER = "process-start-time-unix";

interface Props {
  total_slots?: unknown;
  default_generation_settings?: { n_ctx?: unknown };
}

/** The KV capacity from `/props` (see the module comment for why one slot's n_ctx). */
export function capacityFromProps(props: unknown): Capacity | undefined {
  if (typeof props !== "object" || props === null) return undefined;
  const p = props as Props;
  const nCtx = positiveInt(typeof p.default_generation_settings?.n_ctx === "number" ? p.default_generation_settings.n_ctx : undefined);
  if (nCtx === undefined) return undefined;
  const slots = typeof p.total_slots === "number" ? `, ${p.total_slots} slots` : "";
  return { tokens: nCtx, source: `/props default_generation_settings.n_ctx (one slot's context${slots})` };
}

function single(scrape: EngineScrape, name: string): number | undefined {
  const found = series(scrape.samples, name).find((s) => Number.isFinite(s.value));
  return found?.value;
}

export const llamacpp: Engine = {
  name: "llamacpp",
  reportedAs: "llama.cpp",
  prefix: "llamacpp:",
  capacityEndpoint: "/props",
  readLoad(scrape: EngineScrape) {
    const running = single(scrape, LLAMACPP_METRICS.running);
    const waiting = single(scrape, LLAMACPP_METRICS.waiting);
    if (running === undefined && waiting === undefined) {
      throw new Error(`no ${LLAMACPP_METRICS.running} or ${LLAMACPP_METRICS.waiting} on the metrics page`);
    }
    return { running: count(running), waiting: count(waiting), kvUsage: ratio(single(scrape, LLAMACPP_METRICS.kvUsage)) };
  },
  readCapacity(scrape: EngineScrape) {
    return capacityFromProps(scrape.props);
  },
  readMaxRunning(scrape: EngineScrape) {
    // Its slots (`-np`): a request past them waits in the server's queue for one to free.
    const p = scrape.props;
    return typeof p === "object" && p !== null ? positiveInt((p as Props).total_slots as number | undefined) : undefined;
  },
  restartCounters: LLAMACPP_METRICS.restartCounters,
  startHeader: LLAMACPP_START_HEADER,
};
