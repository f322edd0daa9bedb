/**
 * The production path and internet scale, on paper: `node bench/scale-model.ts` (npm run bench:scale)
 * prints docs/SCALING.md, the whole document (figures and the prose around them), as markdown, to
 * stdout. Regenerate it with `npm run --silent bench:scale > docs/SCALING.md` (without --silent npm
 * prints its own banner first), then `npx prettier --write docs/SCALING.md` (it aligns the tables).
 *
 * Why a model and not a measurement: the two questions are about places this repository cannot
 * run in (Cloudflare's network between a client's edge, a region's worker and Durable Objects and
 * its GPUs) and a load it cannot generate (100,000 requests/s). So this file computes them from
 * three kinds of input, each a named constant with its source beside it (bench/scale-model/inputs.ts):
 *
 * - **measured** here: the CPU of hashing and routing in workerd (bench/workerd/RESULTS.md), the
 *   workers' CPU per request, the whole path in one workerd (read from bench/wan/results.json when
 *   this runs: an upper bound, with the object and local stand-ins), the
 *   index's memory bound (src/core/prefix-index.ts, bench/ROUTE_COST.md), the busiest shard's share
 *   and the cost of sharing load between shards (bench/SHARDS.md), the protocol itself (how many
 *   calls a request and a node report make to the region's objects, and what they write:
 *   src/region/dispatch.ts, src/region/app.ts, src/edge/forward.ts, src/edge/api/nodes.ts,
 *   durable-objects/region.ts, the agent);
 * - **published** by Cloudflare: prices and limits, with the page each comes from;
 * - **assumed**, marked `ASSUMPTION`, where neither exists (e.g. the share of requests that stream,
 *   bytes per log line); the doc lists them, and the tables show how much they matter.
 *
 * The protocol modelled is the one built (issue 22): an edge worker (src/edge/) forwards each
 * request once over a service binding to its region's worker, placed by the region's GPUs
 * (src/region/); the region object's `route` returns a RouteSession on which the first byte and the
 * completion are calls in the same RPC session (one billed object request); a sharded region's
 * exchange ingests every node report and hands them to the shards, which write a node's row only
 * when it changes (the exchange keeps `last_seen`); the exchange interval grows with the shards and
 * the region's node reports, keeping the exchange object within its budget (exchangeIntervalMs).
 * The protocol before it (one worker, three billed calls, reports into shard 0 mirrored to the
 * others) is kept for comparison.
 *
 * Part A: the round trips of each way to place the decision (client, edge, object, origin), the
 * latency each adds over calling the origin directly, its load on the region object and its
 * consistency: option 5 is the one built, the others the alternatives considered. Part B: what
 * 100,000 requests/s over 5 regions and 2,000 nodes costs in Durable Object requests, CPU, memory
 * and money, where the per-object limits bind, and how many shards a region needs, with a sampled
 * Zipf distribution of prompts' first blocks through the production shard function
 * (src/core/shard.ts) showing why that number depends on prefix skew.
 *
 * Everything is a pure function of the constants (tested in bench/test/scale-model.test.ts);
 * the simulation is seeded, so the output is the same on every run.
 *
 * This file is the entry: the command line, and every export of the three parts, which it
 * re-exports so that the test and other callers import one module:
 *
 * - bench/scale-model/inputs.ts: the constants (measured, published, ASSUMPTION), the options,
 *   protocols and deployment compared, and the measured CPU read from bench/wan/results.json;
 * - bench/scale-model/model.ts: the model, pure functions of the inputs (parts A and B, the
 *   skew simulation);
 * - bench/scale-model/render.ts: docs/SCALING.md as markdown (`report`).
 */
import { fileURLToPath } from "node:url";
import { report } from "./scale-model/render.ts";

export * from "./scale-model/inputs.ts";
export * from "./scale-model/model.ts";
export { report, wrap } from "./scale-model/render.ts";

if (process.argv[1] === fileURLToPath(import.meta.url)) process.stdout.write(report());
