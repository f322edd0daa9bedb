import { test } from "node:test";
import assert from "node:assert/strict";
import { DemoArgsError, HELP, QUICK_WORKLOAD, parseDemoArgs } from "../demo/args.ts";
import { REFERENCE_TIME_FACTOR, devConfigWithPolicy } from "../demo/policy-config.ts";
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

test("every option --help documents is parsed into the run's options", () => {
  for (const flag of HELP.matchAll(/^\s+(--[a-z-]+)/gm)) {
    // Each documented flag is accepted (parseArgs is strict: an unknown one throws).
    const name = flag[1]!;
    const boolean = ["--quick", "--json", "--verbose", "--help"].includes(name);
    assert.doesNotThrow(
      () => parseDemoArgs(boolean ? [name] : [name, name === "--policies" ? "sticky" : name === "--fleet" ? "f.json" : "3"]),
      name,
    );
  }
  const args = parseDemoArgs([
    "--quick",
    "--requests",
    "120",
    "--seed",
    "3",
    "--rate",
    "6",
    "--time-factor",
    "2",
    "--concurrency",
    "16",
    "--policies",
    "sticky, round-robin ,warmpath",
    "--fleet",
    "fleet/fleet.8-nodes.json",
    "--json",
    "--json-requests",
    "--verbose",
  ]);
  assert.equal(args.help, false);
  if (args.help) return;
  // --requests wins over --quick's count.
  assert.deepEqual(args.options.workload, { requests: 120, seed: 3, requestsPerSecond: 6 });
  assert.equal(args.options.timeFactor, 2);
  assert.equal(args.options.concurrency, 16);
  assert.deepEqual(args.options.policies, ["sticky", "round-robin", "warmpath"]);
  assert.equal(args.options.fleetFile, "fleet/fleet.8-nodes.json");
  assert.equal(args.json && args.jsonRequests && args.verbose, true);
  const quick = parseDemoArgs(["--quick"]);
  assert.ok(!quick.help && quick.options.workload?.requests === QUICK_WORKLOAD.requests);
  assert.deepEqual(parseDemoArgs(["-h"]), { help: true });
  assert.throws(() => parseDemoArgs(["--time-factor", "0"]), /time-factor/);
  assert.throws(
    () => parseDemoArgs(["--nonsense"]),
    (e) => e instanceof DemoArgsError && /nonsense/.test(e.message),
  );
  assert.throws(() => parseDemoArgs(["--seed"]), DemoArgsError);
  assert.throws(
    () => parseDemoArgs(["--policies", "sticky,nonsense"]),
    (e) => e instanceof DemoArgsError && /"nonsense" is not a policy/.test(e.message),
  );
  assert.throws(() => parseDemoArgs(["--policies", ","]), DemoArgsError);
});

test("the router's durations are scaled to the time factor: the same model time as at the reference x5", () => {
  const effective = (tf?: number) => configSchema.parse(devConfigWithPolicy("warmpath", undefined, tf));
  const reference = effective(REFERENCE_TIME_FACTOR);
  const plain = effective();
  // At the reference factor nothing changes.
  assert.deepEqual(reference, plain);
  const slow = effective(2);
  const fast = effective(10);
  for (let i = 0; i < plain.regions.length; i++) {
    const [p, s, f] = [plain.regions[i]!, slow.regions[i]!, fast.regions[i]!];
    // x2 runs the fleet 2.5 times slower in wall time than x5: every duration of its work 2.5 times longer.
    assert.equal(s.admission.objective_min_ms, p.admission.objective_min_ms * 2.5);
    assert.equal(s.admission.dispatch_wait_ms, p.admission.dispatch_wait_ms * 2.5);
    assert.equal(s.fair_share_wait_seconds, p.fair_share_wait_seconds * 2.5);
    assert.equal(s.max_queue_seconds, p.max_queue_seconds * 2.5);
    assert.equal(f.admission.objective_min_ms, p.admission.objective_min_ms / 2);
    // What is not a duration of the fleet's work stays.
    assert.equal(s.node_silence_ms, p.node_silence_ms);
    assert.deepEqual(s.policy, p.policy);
  }
  assert.equal(slow.limits.first_byte_timeout_floor_ms, plain.limits.first_byte_timeout_floor_ms * 2.5);
  assert.equal(slow.limits.first_byte_timeout_ms, plain.limits.first_byte_timeout_ms);
});
