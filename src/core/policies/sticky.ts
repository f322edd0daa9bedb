/** Sticky sessions: the affinity baseline warmpath is measured against on the running system. */
import { z } from "zod";
import { rendezvousOrder } from "./placement.ts";
import type { PolicyChoice, PolicyDefinition, PolicyInput, RoutingPolicy } from "./types.ts";

export const stickyOptionsSchema = z.strictObject({ name: z.literal("sticky") });

type StickyOptions = z.output<typeof stickyOptionsSchema>;

/**
 * Sticky sessions: the session (or user) key hashed to a node, whatever its load or cache. The
 * policy warmpath exists to beat: it keeps one user's turns together but cannot share a prefix
 * across users, and it cannot move a hot user off a busy node. Requests without a key are hashed
 * on their first block.
 */
class StickySessionPolicy implements RoutingPolicy {
  readonly name = "sticky";
  choose({ candidates, request }: PolicyInput): PolicyChoice {
    const key = request.sessionKey ?? request.hashes[0] ?? "";
    return { index: rendezvousOrder(candidates, "sticky:" + key)[0]!, decision: "session" };
  }
}

export const sticky: PolicyDefinition<StickyOptions> = {
  options: stickyOptionsSchema,
  create: () => new StickySessionPolicy(),
};
