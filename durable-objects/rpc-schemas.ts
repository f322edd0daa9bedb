/**
 * Validation of the region Durable Object's RPC inputs. The worker is the only caller, but an
 * RPC boundary is still a trust boundary: a bad call must be refused, not corrupt the node table
 * or the index. Kept cheap (no per-hash regex) because `route` runs on every request.
 */
import { z } from "zod";

const nodeId = z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/);

export const routeRequestSchema = z.object({
  requestId: z.string().min(1).max(128),
  model: z.string().min(1).max(256),
  hashes: z.array(z.string().length(16)).max(4096),
  promptTokens: z.number().int().min(0),
  sessionKey: z.string().max(1024).optional(),
  exclude: z.array(nodeId).max(16).optional(),
});

export const completionOutcomeSchema = z.object({
  status: z.enum(["ok", "failed", "stream-error", "cancelled"]),
  usage: z
    .object({
      promptTokens: z.number().int().min(0),
      cachedTokens: z.number().int().min(0),
      completionTokens: z.number().int().min(0),
    })
    .optional(),
});

export const nodeReportSchema = z.object({
  nodeId,
  url: z.url({ protocol: /^https?$/ }),
  models: z.array(z.string().min(1).max(256)).min(1).max(64),
  kvCapacityTokens: z.number().int().positive(),
  running: z.number().int().min(0),
  waiting: z.number().int().min(0),
  kvUsage: z.number().min(0).max(1),
  bootId: z.string().max(128).optional(),
});

export const ticketSchema = z.string().min(1).max(64);
export const nodeIdSchema = nodeId;
