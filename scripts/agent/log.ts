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
    case "deregistered":
      return `deregistered from the router (${e.reason})`;
    case "fatal":
      return `fatal: ${e.error}`;
  }
}
