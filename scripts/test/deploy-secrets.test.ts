/**
 * Reading `npm run deploy -- --secrets-file FILE` (scripts/deploy/secrets.ts): what a malformed file
 * is told, and that no part of a value is in it; and the JSON error position it is told with
 * (scripts/deploy/json-position.ts), which JSON.parse's own message cannot give without quoting the
 * text. What each worker receives is in scripts/test/deploy.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jsonErrorPosition } from "../deploy/json-position.ts";
import { readSecretsFile, SecretsFileError } from "../deploy/secrets.ts";

/** Values shaped like real ones: base64 with `=` padding (what made a JSON line read as dotenv a "name"), and hex. */
const INTERNAL = "k2J9x/Qv7TzR+8wLpY3mN5bH0cXfA6sD1eGiKoUq4jE=";
const ADMIN = "Zm9vYmFyYmF6cXV4UXdlcnR5VWlvcA==";
const ORIGIN = "9f3c1a7be2d84c6f0a5e9b1d3c7f2a8e";
const VALUES = [INTERNAL, ADMIN, ORIGIN];

/** The error readSecretsFile throws for `content`, without the file's own path (a random name). */
function errorFor(content: string, name: string): string {
  const dir = mkdtempSync(join(tmpdir(), "warmpath-secrets-read-"));
  const file = join(dir, name);
  try {
    writeFileSync(file, content, { mode: 0o600 });
    let message: string | undefined;
    try {
      readSecretsFile(file);
    } catch (e) {
      assert.ok(e instanceof SecretsFileError, String(e));
      message = e.message;
    }
    assert.ok(message !== undefined, "refused");
    return message.replaceAll(file, "FILE");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** No four characters in a row of any value (nor the whole of one) are in `message`. */
function assertNoValue(message: string): void {
  for (const value of VALUES)
    for (let i = 0; i + 4 <= value.length; i++)
      assert.ok(!message.includes(value.slice(i, i + 4)), `part of a value (${i}..${i + 4}) in: ${message}`);
}

test("a pretty-printed JSON secrets file with a trailing comma is refused by its position, with no part of any value", () => {
  const content = `{\n  "INTERNAL_SECRET": "${INTERNAL}",\n  "ADMIN_TOKEN": "${ADMIN}",\n  "ORIGIN_TOKEN": "${ORIGIN}",\n}\n`;
  const message = errorFor(content, "secrets.json");
  // Read as JSON (it starts with `{`), not again as dotenv: the comma before `}` on line 5.
  assert.match(message, /^--secrets-file FILE: not valid JSON at line 5, column 1 \(a trailing comma/);
  assert.doesNotMatch(message, /INTERNAL_SECRET|ADMIN_TOKEN|ORIGIN_TOKEN/, "not even the names: only where");
  assertNoValue(message);
  // An unexpected token, where V8's own message quotes the text around it and gives no position.
  const bare = errorFor(`{"ADMIN_TOKEN": ${ADMIN.slice(0, 8)},\n "INTERNAL_SECRET": "${INTERNAL}"}`, "secrets.json");
  assert.match(bare, /not valid JSON at line 1, column 17 /);
  assertNoValue(bare);
});

test("a dotenv secrets file with a malformed line is refused by count and line, with no part of any value", () => {
  const content = [
    `INTERNAL_SECRET=${INTERNAL}`,
    "# the admin token",
    `"ADMIN_TOKEN": "${ADMIN}",`, // a JSON line pasted into a dotenv file
    `origin token=${ORIGIN}`,
    "",
  ].join("\n");
  const message = errorFor(content, "secrets.env");
  assert.match(
    message,
    /^--secrets-file FILE: 2 entries' names are not a secret's name \(UPPER_SNAKE_CASE: A-Z, 0-9, _\) at lines 3, 4; not shown/,
  );
  assertNoValue(message);
  // One, in JSON: counted the same way, by the line of its key.
  const json = errorFor(`{\n  "INTERNAL_SECRET": "${INTERNAL}",\n  "${ADMIN}": "x"\n}`, "secrets.json");
  assert.match(json, /1 entry's name is not a secret's name [^]* at line 3; not shown/);
  assertNoValue(json);
  // A well-formed file still reads, either way.
  const dir = mkdtempSync(join(tmpdir(), "warmpath-secrets-read-"));
  try {
    writeFileSync(join(dir, "ok.json"), `{\n  "INTERNAL_SECRET": "${INTERNAL}",\n  "ADMIN_TOKEN": "${ADMIN}"\n}\n`);
    writeFileSync(join(dir, "ok.env"), `INTERNAL_SECRET=${INTERNAL}\nexport ADMIN_TOKEN='${ADMIN}'\n`);
    for (const file of ["ok.json", "ok.env"])
      assert.deepEqual(readSecretsFile(join(dir, file)), { INTERNAL_SECRET: INTERNAL, ADMIN_TOKEN: ADMIN }, file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the JSON error position is where JSON.parse stops, also where its message gives none", () => {
  for (const text of [
    '{"A": "x=",\n}',
    '{"A": "x"\n "B": "y"}',
    '{"A": "x',
    "{A: 1}",
    '{"A": "x"} junk',
    '{"A": "x\u0001"}',
    '{"A": 01}',
    '{"A": "\\q"}',
    '{"A": "v"}\n\n x',
    '{"A" "x"}',
  ]) {
    let reported: string | undefined;
    assert.throws(
      () => JSON.parse(text),
      (e: Error) => ((reported = e.message.match(/\(line (\d+) column (\d+)\)$/)?.[0]), true),
    );
    const at = jsonErrorPosition(text);
    assert.equal(`(line ${at?.line} column ${at?.column})`, reported, JSON.stringify(text));
  }
  // V8 gives no position for these (it quotes the text instead).
  assert.deepEqual(jsonErrorPosition('{"A": tru}'), { line: 1, column: 7 });
  assert.deepEqual(jsonErrorPosition('{"A": nul,\n "B": "s"}'), { line: 1, column: 7 });
  assert.deepEqual(jsonErrorPosition('{"A": [1,]}'), { line: 1, column: 10 });
  assert.deepEqual(jsonErrorPosition(""), { line: 1, column: 1 });
  for (const text of ['{"a":[1,2,{"b":null}],"c":-1.5e+3,"d":"\\u00e9\\n","e":true,"f":false}', "[]", " {} "])
    assert.equal(jsonErrorPosition(text), undefined, text);
});
