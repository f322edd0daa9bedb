import { test } from "node:test";
import assert from "node:assert/strict";
import { parseDemoArgs } from "../demo/args.ts";
import { devConfigWithPolicy } from "../demo/policy-config.ts";
import { configSchema } from "../../src/config/schema.ts";

test("--prefill-rate sets every region's configured rate, and the result is a valid configuration", () => {
  const args = parseDemoArgs(["--prefill-rate", "2500", "--policies", "warmpath"]);
  assert.equal(args.help, false);
  if (args.help) return;
  assert.equal(args.options.prefillRate, 2500);
  const config = devConfigWithPolicy("warmpath", args.options.prefillRate) as { regions: Array<Record<string, unknown>> };
  assert.ok(config.regions.length > 0);
  for (const r of config.regions) {
    assert.equal(r.prefill_tokens_per_second, 2500);
    assert.deepEqual(r.policy, { name: "warmpath" });
  }
  assert.equal(configSchema.safeParse(config).success, true);
  // Without the flag, wrangler.toml's own rate (or the default) stands.
  const plain = devConfigWithPolicy("sticky") as { regions: Array<Record<string, unknown>> };
  for (const r of plain.regions) assert.notEqual(r.prefill_tokens_per_second, 2500);
});

test("--prefill-rate must be a positive number", () => {
  assert.throws(() => parseDemoArgs(["--prefill-rate", "-1"]), /prefill-rate/);
  assert.throws(() => parseDemoArgs(["--prefill-rate", "fast"]), /prefill-rate/);
});
