/**
 * The fast fault-injection suite (scripts/faults/run.ts) against wrangler dev and the simulated
 * fleet: a node answering 503, hung before its first byte, killed mid-stream, a region down and
 * back, each under a steady two-tenant load. No request may be lost. ~40 s.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { SCENARIOS, faultConfig, runScenario } from "../faults/run.ts";
import { startSystem, type System } from "../system.ts";

let system: System;
before(async () => {
  system = await startSystem({ port: 0, timeFactorScale: 20, config: faultConfig() });
});
after(async () => {
  await system?.stop();
});

for (const scenario of SCENARIOS) {
  test(`${scenario.name}: nothing lost`, { timeout: 120_000 }, async () => {
    const r = await runScenario(system, scenario);
    assert.equal(r.lost, 0, JSON.stringify(r));
    assert.ok(r.sent >= 30, `${r.sent} sent`);
    assert.ok(r.ok >= r.sent * 0.9, `${r.ok} of ${r.sent} answered: ${JSON.stringify(r.failures)}`);
    if (scenario.name.startsWith("region")) assert.ok((r.regions["eu-west"] ?? 0) > 0, "clients failed over to eu-west");
    assert.notEqual(r.recoverySeconds, null, "answers came back after the fault");
  });
}
