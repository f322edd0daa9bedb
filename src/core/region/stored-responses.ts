/**
 * Stored responses (the Responses API's `previous_response_id`): which node stores each, and
 * whose it is. A follow-up must go to the node storing its response, and only its own tenant's:
 * a node cannot tell tenants apart (it stores `resp_...` for whoever asked), so the region is the
 * only place the owner is known, and an id it does not hold for the asking tenant is never sent
 * to a node (docs/API.md, "Stored responses"; refusals.ts `unknown-response`).
 *
 * Ids are scoped by tenant as the edge and the region worker name them (`tenant:resp_...`; tenant
 * ids are lowercase letters, digits and dashes, so the first `:` ends the tenant): an id is
 * recorded only under the tenant it names, and found only by that tenant. In memory, bounded like
 * the session hints (`maxSessions`, least recently stored evicted): an object restart forgets
 * them, and their follow-ups are then refused as unknown (the client sends the conversation again,
 * as after OpenAI's own retention).
 */
import { BoundedLru } from "../lru.ts";

/** The tenant a scoped response id (`tenant:resp_...`) names, or undefined for an id not scoped. */
export function ownerOf(scopedId: string): string | undefined {
  const colon = scopedId.indexOf(":");
  return colon > 0 ? scopedId.slice(0, colon) : undefined;
}

export class StoredResponses {
  private readonly byId: BoundedLru<string, { node: string; tenant: string }>;

  /** @param capacity responses remembered (the region's `maxSessions`). */
  constructor(capacity: number) {
    this.byId = new BoundedLru(capacity);
  }

  /** `node` stores `tenant`'s response `scopedId`; an id scoped by another tenant (or none) is not recorded. */
  remember(scopedId: string, tenant: string, node: string): void {
    if (ownerOf(scopedId) === tenant) this.byId.set(scopedId, { node, tenant });
  }

  /** The node storing `tenant`'s response `scopedId`, or undefined when this region holds no response of that tenant by that id. */
  nodeOf(scopedId: string, tenant: string): string | undefined {
    const stored = this.byId.get(scopedId);
    return stored !== undefined && stored.tenant === tenant && ownerOf(scopedId) === tenant ? stored.node : undefined;
  }

  /** A node restarted or left: the responses it stored are gone with it. */
  forgetNode(node: string): void {
    this.byId.deleteWhere((s) => s.node === node);
  }
}
