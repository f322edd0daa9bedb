/** How warmpath-agent writes its events: one human line each, on stderr. */
import type { AgentEvent } from "./agent.ts";

/** One line per event, saying which side (engine or router) changed. */
export function formatEvent(e: AgentEvent): string {
  switch (e.event) {
    case "engine_ok":
      return `engine ok: ${e.engine} at ${e.url}`;
    case "engine_failing":
      return `engine failing: ${e.error}`;
    case "engine_down":
      return `engine down (${e.reason}): the node leaves the router until it is back`;
    case "boot":
      return `boot id ${e.boot_id} (${e.reason})`;
    case "capacity":
      return `KV capacity ${e.tokens} tokens, from ${e.source}`;
    case "router_ok":
      return "router ok: reports accepted again";
    case "router_failing":
      return `router failing: ${e.error} (retrying with backoff)`;
    case "registered":
      return `registered with the router: node secret received, kept in ${e.kept_in === "memory" ? "memory (pass --state-file to keep it across restarts)" : "the state file"}`;
    case "identity_refused":
      return `router refused this node's identity: ${e.error} (the node id is held by another credential, e.g. this agent's previous run whose secret was lost; registering again in ${Math.round(e.retry_in_ms / 1000)} s)`;
    case "deregistered":
      return `deregistered from the router (${e.reason})`;
    case "not_deregistered":
      return `not deregistered (${e.reason}): this agent holds no node secret (a static node, or the registration answer was lost); the router expires the node by silence`;
    case "fatal":
      return `fatal: ${e.error}`;
  }
}
