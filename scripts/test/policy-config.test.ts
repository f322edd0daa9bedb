/** The demo's configuration (scripts/demo/policy-config.ts): scaled to any time factor, it is one the router accepts. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { configSchema } from "../../src/config/schema.ts";
import { devConfigWithPolicy } from "../demo/policy-config.ts";

test("scaled to a time factor slower than real time, the demo's configuration is valid: its first-byte floor stays within the timeout", () => {
  for (const timeFactor of [0.1, 0.5, 1, 2, 5, 20]) {
    const config = devConfigWithPolicy("warmpath", undefined, timeFactor);
    const parsed = configSchema.safeParse(config);
    assert.ok(parsed.success, `time factor ${timeFactor}: ${parsed.success ? "" : parsed.error.issues[0]?.message}`);
    const { first_byte_timeout_floor_ms: floor, first_byte_timeout_ms: timeout } = parsed.data.limits;
    assert.ok(floor <= timeout, `time factor ${timeFactor}: floor ${floor} > timeout ${timeout}`);
  }
});
