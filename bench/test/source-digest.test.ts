import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GOODPUT_ENTRY, importedModules, sourceDigest } from "../source-digest.ts";

/** A small tree shaped as the repository is: an entry, what it imports (every kind of import), and what it does not. */
function tree(): string {
  const root = mkdtempSync(join(tmpdir(), "digest-"));
  const put = (path: string, text: string) => {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), text);
  };
  put(
    "bench/run.ts",
    [
      'import { a } from "../src/core/a.ts";',
      'import type { T } from "./types.ts";',
      'export { b } from "./b.ts";',
      'const pool = () => new Worker(new URL("./pool.ts", import.meta.url));',
      'const lazy = () => import("./lazy.ts");',
      'import "./side-effect.ts";',
      "const w = () => new Worker(`./worker.ts`);",
      'const r = () => require("./required.ts");',
      'import { j } from "./ts-named-js.js";',
      'import { readFileSync } from "node:fs";',
      "// prose names a directory, not a module: read from `../shared/traces/`",
    ].join("\n"),
  );
  put("src/core/a.ts", 'import { c } from "./c.ts";\nexport const a = 1;\n');
  put("src/core/c.ts", 'import { a } from "./a.ts";\nexport const c = 3;\n'); // a cycle
  put("bench/types.ts", "export type T = number;\n");
  put("bench/b.ts", "export const b = 2;\n");
  put("bench/pool.ts", "export {};\n");
  put("bench/lazy.ts", "export {};\n");
  put("bench/side-effect.ts", "export {};\n");
  put("bench/worker.ts", "export {};\n");
  put("bench/required.ts", "export {};\n");
  put("bench/ts-named-js.ts", "export const j = 1;\n");
  put("bench/other.ts", "not imported by the entry\n");
  put("src/edge/log.ts", "not imported by the entry\n");
  put("bench/test/run.test.ts", 'import "../run.ts";\n');
  put("bench/RESULTS.md", "# results\n");
  return root;
}

/** Runs `body` on a fresh {@link tree}, removed afterwards whatever `body` does. */
function inTree(body: (root: string) => void): void {
  const root = tree();
  try {
    body(root);
  } finally {
    rmSync(root, { recursive: true });
  }
}

test("the modules an entry imports, through every kind of import and a cycle, and nothing else", () =>
  inTree((root) => {
    assert.deepEqual(importedModules(root, ["bench/run.ts"]), [
      "bench/b.ts",
      "bench/lazy.ts",
      "bench/pool.ts",
      "bench/required.ts",
      "bench/run.ts",
      "bench/side-effect.ts",
      "bench/ts-named-js.ts",
      "bench/types.ts",
      "bench/worker.ts",
      "src/core/a.ts",
      "src/core/c.ts",
    ]);
    assert.match(sourceDigest(root, ["bench/run.ts"]), /^[0-9a-f]{16}$/);
    assert.throws(() => importedModules(root, ["bench/missing.ts"]), /no such module/);
    // A module named that is not there: an error, never a module silently left out.
    writeFileSync(join(root, "bench/b.ts"), 'export { gone } from "./gone.ts";\n');
    assert.throws(() => importedModules(root, ["bench/run.ts"]), /bench\/b\.ts names \.\/gone\.ts, which is not a file/);
  }));

test("an imported module's change changes the digest; another module, a test or a result does not", () =>
  inTree((root) => {
    const digest = () => sourceDigest(root, ["bench/run.ts"]);
    const before = digest();
    writeFileSync(join(root, "bench/other.ts"), "changed\n");
    writeFileSync(join(root, "src/edge/log.ts"), "changed\n");
    writeFileSync(join(root, "bench/test/run.test.ts"), "changed\n");
    writeFileSync(join(root, "bench/RESULTS.md"), "# other results\n");
    assert.equal(digest(), before);
    writeFileSync(join(root, "src/core/c.ts"), 'import { a } from "./a.ts";\nexport const c = 4;\n');
    assert.notEqual(digest(), before);
    writeFileSync(join(root, "src/core/c.ts"), 'import { a } from "./a.ts";\nexport const c = 3;\n');
    assert.equal(digest(), before);
  }));

test("a module moved, or bytes moved between modules, changes the digest", () =>
  inTree((root) => {
    const digest = () => sourceDigest(root, ["bench/run.ts"]);
    const before = digest();
    renameSync(join(root, "bench/pool.ts"), join(root, "bench/pool2.ts"));
    const run = join(root, "bench/run.ts");
    writeFileSync(run, readFileSync(run, "utf8").replace("./pool.ts", "./pool2.ts"));
    assert.notEqual(digest(), before);
    // The same modules' bytes in total, split differently between two of them.
    writeFileSync(join(root, "bench/b.ts"), "export const b = 2;\nexport {};\n");
    writeFileSync(join(root, "bench/lazy.ts"), "");
    const moved = digest();
    writeFileSync(join(root, "bench/b.ts"), "export const b = 2;\n");
    writeFileSync(join(root, "bench/lazy.ts"), "export {};\n");
    assert.notEqual(moved, digest());
  }));

test("bench:goodput's digest covers its router, its anchors, its workloads and its report", () => {
  const modules = importedModules(join(import.meta.dirname, "..", ".."), [GOODPUT_ENTRY]);
  for (const m of [
    "bench/goodput/pool.ts",
    "bench/goodput/report.ts",
    "bench/goodput/routers.ts",
    "bench/workloads/generator.ts",
    "src/core/region/router.ts",
    "src/core/region/tenant-demand.ts",
    "src/core/node-load.ts",
  ])
    assert.ok(modules.includes(m), `${m} is digested`);
  assert.ok(!modules.some((m) => m.startsWith("src/edge/") || m.includes("/test/")), "the edge and the tests are not");
});
