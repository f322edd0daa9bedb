/**
 * Fault injection against the running system in the production topology (scripts/system.ts,
 * `runtime: "workerd"`: the edge worker and each region's worker in a workerd process of its own,
 * joined over loopback HTTP as service bindings are over the network; the simulated fleet
 * reporting to it) under a steady client load from two tenants: each scenario injects one fault
 * one second into the load (into a node, a region's nodes, a region's Durable Object, a region's
 * worker process, or every worker process) while requests keep flowing until the fault is over,
 * and every request is accounted for:
 * - `ok`: a 200 whose stream ended with `data: [DONE]` and is, event for event, the answer one
 *   node streams for it uninterrupted: the fleet's answer is deterministic filler (fleet/openai.ts,
 *   fleet/continuation.ts), so each answer's text is known to the token in advance;
 * - `corrupt`: a stream that ended with `data: [DONE]` but is not that answer ({@link answerProblem}):
 *   its text differs (a token repeated or missing where another node took over), it has a second
 *   role chunk, id, or finish reason, a usage event that is missing, doubled, unasked for or not
 *   the whole answer's (one tenant asks for usage, the other does not), or an error event;
 * - `failed cleanly`: an error status in OpenAI's shape, or a stream ended by an SSE error event;
 * - `lost`: no answer within the client's timeout, or a stream that stopped without either.
 * When the router's processes are all killed (the edge's with them), two more: `in flight at the
 * kill` (a request under way when they died) and `refused while down` (a connection refused before
 * the edge answered /healthz again). A region worker's kill has no such excuse: the edge stays up,
 * so a stream it was relaying must end with the SSE error event (`region_stream_lost`) and a new
 * request must fail over to the next region. Lost and corrupt must be 0 in every scenario.
 * Recovery: seconds from the fault's end to the next `ok`.
 *
 * Mid-stream continuation (docs/CONTINUATION.md): when a node fails after its first byte (its
 * connection reset by a crash, silent past the stream idle timeout, its own error event, an event
 * that is not JSON), the region worker finishes the answer on another node of the region and relays
 * it as the first node's. A fault that strikes one node mid-stream therefore costs its clients
 * nothing: those four scenarios must end with 0 failed, every stream the node cut `continued
 * mid-stream` (the router's `warmpath_stream_continuations_total`, its increase over the scenario,
 * by how the node failed; the tokens carried and the gap from the failure to the next node's first
 * byte come from its `stream_continued` lines). Before continuation each of those streams ended
 * with an error event (`upstream_stream_error`, `upstream_stream_timeout`). Streams still fail,
 * cleanly, where no node can continue them: every node of the region down (a continuation stays
 * in its region: counted `no-node`), the region's worker killed (the stream dies with the worker
 * relaying it; the edge cannot continue it), every worker process killed.
 *
 * Every request carries a unique tag in its user message (and as its `x-request-id`, so the
 * router's log lines about it can be shown: a scenario's failed, lost and corrupt requests are
 * written to stderr with the end of their stream and those lines), and the fleet records the tags
 * it sent a first byte for (fleet/first-bytes.ts): `duplicated` counts requests whose generation a
 * node started more than once, on any node (a retry after the first byte); it must be 0. A
 * continuation's first byte is recorded apart (`continued_tags`): it starts no generation again,
 * so it is no duplicate, and the nodes' count of them must be the router's. (A "continuation"
 * that started the answer over would show as `corrupt`.) No answer may show the internal URL a
 * redirecting node points at (`leaked internal URL`).
 *
 *   node scripts/faults/run.ts             # the scenarios below, a table on stdout
 *
 * Scenarios: a node answering 503; a node hanging before its first byte (longer than every
 * timeout); a node going silent after its first bytes; a node sending an error event mid-stream,
 * and one sending an event that is not JSON; a node answering 307 to an internal URL; a node whose
 * prefill is 10x slower; a node killed mid-stream and back with a new boot id; a region's GPUs
 * down (every node of it killed) and back; the region's Durable Object restarted; the region's
 * worker process killed mid-request and started again; every worker process (the edge and each
 * region's) killed and started again. Then one tenant's flood against two light ones.
 *
 * No source watcher runs (workerd, not `wrangler dev`): an edit elsewhere in the tree cannot
 * reload a worker and cut its streams mid-scenario. A worker process started again (the last two
 * scenarios) is bundled again from the working tree as it is then.
 *
 * This file runs them and writes docs/faults.md; the rest of scripts/faults/ by concern:
 * settings.ts (the load and the faults' figures), scenarios.ts (the faults), scenario.ts (running
 * one), client.ts (a request and how it ended), answers.ts (the answer it must be), outcomes.ts,
 * counters.ts, router-log.ts and ledger.ts (what is counted and checked), flood.ts (the flood),
 * system.ts (the system under test), results.ts and report.ts (the results and their table).
 */
import { FLOOD_SECONDS, floodSummary, runFlood } from "./flood.ts";
import { formatProblems, formatResults } from "./report.ts";
import type { ScenarioResult } from "./results.ts";
import { runScenario } from "./scenario.ts";
import { SCENARIOS } from "./scenarios.ts";
import {
  ANSWER_TOKENS,
  CLIENT_TIMEOUT_MS,
  FAILOVER_REGION,
  PREFILL_SLOWDOWN,
  RATE_PER_TENANT,
  REGION,
  TOKENS_BEFORE_ERROR_EVENT,
  TOKENS_BEFORE_MALFORMED_EVENT,
  TOKENS_BEFORE_SILENCE,
} from "./settings.ts";
import { startFaultSystem } from "./system.ts";

if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (name: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
  const out = arg("--out");
  // The regions' fair-share bound, to compare with the default (e.g. `--fair-share-wait 2`).
  const fairShareWait = arg("--fair-share-wait");
  const system = await startFaultSystem(fairShareWait === undefined ? undefined : Number(fairShareWait));
  try {
    const results: ScenarioResult[] = [];
    for (const s of SCENARIOS) {
      const r = await runScenario(system, s);
      results.push(r);
      const problems = formatProblems(r);
      if (problems) console.error(problems);
    }
    const flood = await runFlood(system, FLOOD_SECONDS);
    const md = [
      "# Fault injection (fast version)",
      "",
      `Generated by \`npm run faults\` (scripts/faults/run.ts; do not edit by hand): the production topology in workerd (the edge worker and each region's worker in a workerd process of its own, joined over loopback HTTP as their service bindings are over the network) and the simulated fleet (time factor x20), two tenants sending ${RATE_PER_TENANT} streamed requests a second each (a cached system prompt, ~1,000 tokens of the request's own, ${ANSWER_TOKENS} tokens streamed over 1.5 s; one tenant asks for the usage event, the other does not); each fault strikes one second into the load and lasts three seconds (a restart: until it is back; the load goes on until then), then two more seconds of load. The faults: a node answering 503; hung before its first byte, or silent after its first ${TOKENS_BEFORE_SILENCE} tokens (past every timeout; the region worker's stream idle timeout is 3 s); sending vLLM's mid-stream error event after ${TOKENS_BEFORE_ERROR_EVENT} tokens, or an event that is not JSON after ${TOKENS_BEFORE_MALFORMED_EVENT}; answering 307 to an internal URL; prefilling ${PREFILL_SLOWDOWN}x slower; killed mid-stream; every node of ${REGION} killed (its GPUs down, its worker up); the region's Durable Object restarted (\`POST /admin/regions/${REGION}/restart\`); ${REGION}'s region worker process killed with SIGKILL and started again (bundled and booted anew, on the same store), the edge staying up; every worker process (the edge's and each region's) killed with SIGKILL and started again on the same stores.`,
      "",
      `A node that fails after its first byte no longer costs its clients their answers: the region worker continues each stream it cut on another node of the region, with the text the client already has, and relays it as the first node's (docs/CONTINUATION.md). So the four scenarios where one node fails mid-stream (silent, its error event, a malformed event, killed) must end with 0 failed; before continuation every stream that node was serving ended with an SSE error event (\`upstream_stream_timeout\`, \`upstream_stream_error\`). Continued mid-stream: the router's \`warmpath_stream_continuations_total\`, its increase over the scenario, by how the node failed, then the failures it did not continue, by how and why (\`no-node\`: no node of the region left to take the stream). The measured column gives the tokens the continued streams carried over and the time from each failure to the next node's first byte (from the router's \`stream_continued\` lines; for a silent node, counted from the end of the 3 s idle timeout). The nodes record a continuation's first byte apart from a generation's, and their count of continuations is the router's (a mismatch would be noted in the measured column). Streams still fail cleanly where no node can continue them: every node of ${REGION} down (a continuation stays in its region), ${REGION}'s worker killed (the streams die with the worker relaying them; the edge does not continue them), every worker process killed.`,
      "",
      `Ok means a stream that ended with \`data: [DONE]\` and is, event for event, what one node streams for that request uninterrupted: the fleet's answer is deterministic filler, so each answer's ${ANSWER_TOKENS} tokens are known in advance, and each answer is checked for its text (no token repeated or missing where a second node took over), one role chunk, one id (with one \`created\` and \`model\`), one finish reason, and, for the tenant that asks for it, one usage event whose completion tokens are the whole answer's (none for the other). Corrupt: a stream that ended with \`data: [DONE]\` but is not that answer; it must be 0. Lost means no answer within ${CLIENT_TIMEOUT_MS / 1000} s, or a stream cut without an error event; it must be 0. When every worker process is killed (the edge's too), a request under way is counted \`in flight at the kill\` and one refused while the edge is down \`refused while down\`, not lost. When only ${REGION}'s region worker is killed the edge stays up, so there is no such excuse: a stream it was relaying from ${REGION} must end with an SSE error event (\`region_stream_lost\`), and a request it had not answered yet, or sent while it is down, must be answered by ${FAILOVER_REGION} (the edge fails over), or refused at once with 429 \`objective_unreachable\` and \`Retry-After\` where ${FAILOVER_REGION}, carrying both regions' traffic, cannot serve it within its objective (docs/ADMISSION.md); one sent once its process was started again but before the harness saw it answer /healthz may be answered by either region (it restarts on its store, its node table intact). Duplicated: requests whose generation a node started (sent a first byte for) more than once, on any node, found by a tag in each request's prompt that the fleet records at its first byte; it must be 0 (a continuation's first byte is recorded apart: it starts no generation again; one that started the answer over would be corrupt). Leaked internal URL: answers whose body or headers show the URL the redirecting node points at; it must be 0. Recovery: from the fault's end to the first ok answer sent after it (for the region worker, its own recovery is in the last column: when ${REGION} itself answered ok again). Usage ledger (docs/USAGE.md): \`GET /admin/usage\` read before and after the scenario; \`exact\` when every request a node answered (status 200) was billed once and the tenant that asks for the usage event was billed exactly the tokens its answers' usage events carried; \`estimated\`: answers whose node reported no usage (a stream cut with no node to continue it). A region worker killed mid-stream takes the bills of the streams it was relaying with it (they ended \`region_stream_lost\`).`,
      "",
      formatResults(results),
      "",
      floodSummary(flood),
      "",
    ].join("\n");
    if (out) (await import("node:fs")).writeFileSync(out, md);
    console.log(md);
  } finally {
    await system.stop();
  }
}
