/**
 * Serving a request in one region (the region worker): ask the region's Durable Object for a node,
 * call the node, retry another node before the first byte, and relay the answer. Each step is its
 * own function: tryNodes (place.ts: the object, or the stateless fallback, and callNode,
 * call-node.ts), accept (place.ts: first-byte bookkeeping), respond (respond.ts).
 *
 * Bounded everywhere: at most `1 + max_retries` nodes, `first_byte_timeout_ms` per node until the
 * first body byte. The answer is only started once the node has produced its first body byte, so
 * every failure before that point (connection refused, 5xx, 429, timeout, an empty stream) can
 * still be retried on another node, here by the GPUs, without another long-haul crossing and
 * without the client seeing anything. A region that cannot serve the request answers the edge a
 * {@link RegionRefusal} (the edge then tries the next region).
 */
import type { Attempt, RegionRefusal } from "../contracts/region-service.ts";
import { shardOf } from "../core/shard.ts";
import type { RegionContext } from "./context.ts";
import { accept, tryNodes } from "./place.ts";
import { settledIfThrown } from "./settle.ts";
import { respond } from "./respond.ts";

export { firstByteTimeoutMs } from "./call-node.ts";

/** The region's answer to the edge: the node's (relayed), or the region's refusal. */
type RegionOutcome = { ok: true; response: Response } | { ok: false; refusal: RegionRefusal };

export async function serveInRegion(rc: RegionContext): Promise<RegionOutcome> {
  const { request } = rc;
  const region = rc.region.config.name;
  // A sharded region: the shard owning the prompt's first block decides (src/core/shard.ts); a
  // follow-up of a stored response asks the shard that remembers the response's node.
  const shards = rc.region.init.settings.shards;
  const shard = shards > 1 ? shardOf(request.previousResponseId ?? request.hashes[0], shards) : 0;
  const own: Attempt[] = [];
  const exclude: string[] = [];
  const tried = await tryNodes(rc, { shard, exclude, body: rc.body, own });
  if (!tried.ok) return { ok: false, refusal: tried.refusal };
  const { placed, session, upstream } = tried;
  // From here the relay's end settles the placement; an error of this worker's before it does so.
  const response = await settledIfThrown(
    rc,
    placed,
    session,
    () => {
      const { sse, foldFirstByte } = accept(rc, placed, session, upstream, shard);
      return respond(rc, {
        session,
        shard: shards > 1 ? shard : undefined,
        placed,
        upstream,
        attempts: request.attempts,
        own,
        shardIndex: shard,
        exclude,
        sse,
        foldFirstByte,
      });
    },
    upstream.reader,
  );
  return { ok: true, response };
}
