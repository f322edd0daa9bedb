import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { tapFailures, vitestFailures } from "../test-report.ts";

/** Runs node's test runner on one file and returns its TAP report. */
function tapOf(source: string): { status: number | null; tap: string } {
  const dir = mkdtempSync(join(tmpdir(), "warmpath-report-"));
  try {
    const file = join(dir, "fixture.test.mjs");
    writeFileSync(file, source);
    // Without NODE_TEST_CONTEXT the nested runner reports on its own stdout, not to this test's runner.
    const env = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    const r = spawnSync(process.execPath, ["--test", "--test-reporter=tap", file], { encoding: "utf8", env });
    return { status: r.status, tap: r.stdout };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("names a failed assertion with its error and location", () => {
  const { status, tap } = tapOf(`import { test } from "node:test";
test("passes", () => {});
test("adds up", () => { throw new Error("expected 4, got 5"); });`);
  assert.equal(status, 1);
  const failures = tapFailures(tap);
  const own = failures.find((f) => f.startsWith("adds up"));
  assert.ok(own, failures.join("\n"));
  assert.match(own, /expected 4, got 5/);
  assert.match(own, /location: .*fixture\.test\.mjs:3/);
  assert.ok(!failures.some((f) => f.startsWith("passes")));
});

test("names a file that fails after its tests passed, and the error that failed it", () => {
  // Every test passes; the error thrown after "leaks" ended fails the file's process: what
  // `npm test` once reported only as "967 passed, 1 failed".
  const { status, tap } = tapOf(`import { test } from "node:test";
test("leaks", () => { setTimeout(() => { throw new Error("late boom"); }, 20); });`);
  assert.equal(status, 1);
  const failures = tapFailures(tap);
  assert.ok(
    failures.some((f) => /generated asynchronous activity after the test ended.*late boom/.test(f)),
    failures.join("\n"),
  );
  assert.ok(
    failures.some((f) => /fixture\.test\.mjs\n[\s\S]*exitCode: 1/.test(f)),
    failures.join("\n"),
  );
});

test("a passing run has no failures", () => {
  const { status, tap } = tapOf(`import { test } from "node:test";\ntest("fine", () => {});`);
  assert.equal(status, 0);
  assert.deepEqual(tapFailures(tap), []);
});

test("vitest: failed tests with their first error lines, and a file that failed outside any test", () => {
  const failures = vitestFailures({
    numPassedTests: 1,
    numFailedTests: 1,
    testResults: [
      {
        name: "test/a.test.ts",
        status: "failed",
        assertionResults: [
          { fullName: "a works", status: "passed" },
          { fullName: "a breaks", status: "failed", failureMessages: ["AssertionError: 1 !== 2\n  at x\n\n  at y"] },
        ],
      },
      { name: "test/b.test.ts", status: "failed", message: "Cannot find module './gone'", assertionResults: [] },
      { name: "test/c.test.ts", status: "passed", assertionResults: [{ fullName: "c", status: "passed" }] },
    ],
  });
  assert.deepEqual(failures, [
    "test/a.test.ts: a breaks\n    AssertionError: 1 !== 2\n    at x\n    at y",
    "test/b.test.ts: failed outside any test\n    Cannot find module './gone'",
  ]);
});
