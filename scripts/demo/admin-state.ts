/**
 * The nodes' side of the figures: per node, requests routed, decisions and the usage the nodes
 * reported, from the router's /admin/state. Usage reaches the region objects only after each
 * stream ends (waitUntil), so reading it right after the replay would undercount: this waits
 * until every answered request is recorded.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { DEV_ADMIN_TOKEN } from "../../src/config/dev-credentials.ts";
import { adminStateSchema, type AdminState } from "../../src/contracts/admin.ts";

export type { AdminState };

export async function adminState(url: string): Promise<AdminState> {
  const res = await fetch(`${url}/admin/state`, { headers: { authorization: `Bearer ${DEV_ADMIN_TOKEN}` } });
  if (!res.ok) throw new Error(`/admin/state: HTTP ${res.status}`);
  return adminStateSchema.parse(await res.json());
}

/** Requests whose usage the nodes reported, over the whole system. */
function measuredRequests(state: AdminState): number {
  return state.regions.reduce((n, r) => n + r.nodes.reduce((m, x) => m + x.metrics.measuredRequests, 0), 0);
}

/** /admin/state once `answered` requests' usage is recorded, or as it stands after `timeoutMs`. */
export async function adminStateWhenRecorded(url: string, answered: number, timeoutMs = 5000): Promise<AdminState> {
  let state = await adminState(url);
  const deadline = Date.now() + timeoutMs;
  while (measuredRequests(state) < answered && Date.now() < deadline) {
    await sleep(100);
    state = await adminState(url);
  }
  return state;
}
