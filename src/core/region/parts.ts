/**
 * The region's state that its routing steps share: RegionRouter (router.ts) builds it once, and
 * the placement (placement.ts), the requests in flight (tickets.ts) and the queue
 * (queued-admission.ts) read and update it. One writer: the region object calls them in turn.
 */
import type { BoundedLru } from "../lru.ts";
import type { PrefixIndex } from "../prefix-index.ts";
import type { RoutingPolicy } from "../policies/index.ts";
import type { ActiveBlocks } from "./active-blocks.ts";
import type { ClassReserve } from "./class-reserve.ts";
import type { FairShare } from "./fair-share.ts";
import type { RegionLedger } from "./ledger.ts";
import type { LongPrefixes } from "./long-prefixes.ts";
import type { NodeTable } from "./node-table.ts";
import type { RegionSettings } from "./settings.ts";
import type { StoredResponses } from "./stored-responses.ts";
import type { TenantDemand } from "./tenant-demand.ts";

export interface RegionParts {
  readonly settings: RegionSettings;
  readonly nodes: NodeTable;
  readonly index: PrefixIndex;
  readonly policy: RoutingPolicy;
  /** The session hint's last node, per session key. */
  readonly sessions: BoundedLru<string, string>;
  /** Stored responses (Responses API, `tenant:resp_...`) -> the node holding each and its tenant: a follow-up must go there, and only its tenant's. */
  readonly responses: StoredResponses;
  /** In-flight prompt blocks per node, for a policy that reads them (dynamo-kv). */
  readonly active: ActiveBlocks | undefined;
  /** The long prompts dispatched here, for the edge's cross-region choice (long-prefixes.ts). */
  readonly longPrefixes: LongPrefixes;
  readonly ledger: RegionLedger;
  readonly fair: FairShare;
  /** The nodes the classes below an active one may keep busy (class-reserve.ts). */
  readonly reserve: ClassReserve;
  /** Tenants sending more than their share, queued a class lower (tenant-demand.ts). */
  readonly demand: TenantDemand;
}
