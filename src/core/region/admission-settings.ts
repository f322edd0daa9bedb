/**
 * The settings of admission by objective (admission.ts) and of the region's queue
 * (admission-queue.ts), with their defaults and why. Part of RegionSettings; configured per region
 * as `[regions.admission]` (src/config/schema.ts), documented in docs/ADMISSION.md.
 */
import { z } from "zod";

export const admissionSettingsSchema = z.strictObject({
  /** Place by objective and hold in the region's queue; off: every request goes to a node queue at once (what every anchor does by default). Default on. */
  enabled: z.boolean(),
  /** The default objective's floor: no first token is expected sooner than this (ms). Default 1,000. */
  objectiveMinMs: z.number().int().min(1),
  /** The default objective: this many times the request's cold prefill (its whole prompt at the region's learned rate). Default 5. */
  objectivePrefillFactor: z.number().positive().max(1_000),
  /**
   * A node with more than this much prefill queued (ms at its rate) takes nothing more from the
   * queue: the rest waits in the region, where it can still be reordered. Default 500 ms.
   */
  dispatchWaitMs: z.number().min(0),
  /** How the queue orders one tenant's requests of one class: earliest deadline first, or least uncached work first. Default `deadline`. */
  order: z.enum(["deadline", "work"]),
  /** Requests the queue holds (per object: a sharded region's shards each hold this many). Default 1,024. */
  maxQueued: z.number().int().min(0),
  /** Prompt blocks the queue holds (16 bytes each in a request's hashes): its memory bound. Default 262,144 (4 MiB of hashes). */
  maxQueuedBlocks: z.number().int().min(0),
});

export type AdmissionSettings = z.infer<typeof admissionSettingsSchema>;

/**
 * Defaults. The objective is the definition (max(1 s, 5 x the cold prefill)): a chat
 * turn is expected within a second, a long document within five times what computing it from
 * scratch takes, whatever is cached. `dispatchWaitMs` is half the slack of the tightest default
 * objective (1 s less a fifth of it for the request's own prefill, halved): a node's queue is
 * latency every later request there pays, so it is kept short enough that a chat turn released
 * to it still makes its second, and long enough that the node never idles while the region holds
 * work (the object hears each first byte within a round trip, milliseconds).
 */
export const DEFAULT_ADMISSION: AdmissionSettings = {
  enabled: true,
  objectiveMinMs: 1_000,
  objectivePrefillFactor: 5,
  dispatchWaitMs: 400,
  order: "deadline",
  maxQueued: 1_024,
  maxQueuedBlocks: 262_144,
};
