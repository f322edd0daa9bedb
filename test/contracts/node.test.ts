/** A node's load report (src/contracts/node.ts): what a report may say. */
import { describe, expect, it } from "vitest";
import { MAX_REPORTED_REQUESTS, nodeReportSchema } from "../../src/contracts/node.ts";

const report = {
  node_id: "gpu-1",
  region: "us",
  url: "http://gpu-1:8000",
  models: ["m"],
  kv_capacity_tokens: 100_000,
  running: 3,
  waiting: 0,
  kv_usage: 0.4,
};

describe("nodeReportSchema", () => {
  it("takes a node's requests running and waiting up to the bound, and refuses one past it by name", () => {
    for (const field of ["running", "waiting"] as const) {
      expect(nodeReportSchema.safeParse({ ...report, [field]: MAX_REPORTED_REQUESTS }).success).toBe(true);
      const refused = nodeReportSchema.safeParse({ ...report, [field]: MAX_REPORTED_REQUESTS + 1 });
      expect(refused.success).toBe(false);
      expect(refused.error?.issues[0]?.path).toEqual([field]);
    }
  });
});
