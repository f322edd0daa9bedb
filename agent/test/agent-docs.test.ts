/**
 * docs/AGENT.md and agent/Dockerfile against the agent's own definitions (agent/args.ts): every
 * flag and environment variable is documented, with the default the code applies, and the
 * Dockerfile runs the file the bundle build writes. Static checks, no process started.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { AGENT_DEFAULTS, AGENT_OPTIONS, ENGINE_KEY_ENV, HELP, TOKEN_ENV } from "../args.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const DOC = readFileSync(join(ROOT, "docs", "AGENT.md"), "utf8");

/** The docs' table row of a flag or variable: the line starting `| \`--name`. */
function row(name: string): string {
  const line = DOC.split("\n").find((l) => l.startsWith(`| \`${name}`) || l.startsWith(`| \`-h\`, \`${name}`));
  assert.ok(line, `docs/AGENT.md has no table row for ${name}`);
  return line;
}

test("every flag is in --help and in docs/AGENT.md's table, with the default the code applies", () => {
  const flags = Object.keys(AGENT_OPTIONS);
  const documented = DOC.split("\n")
    .filter((l) => /^\| `(-h`, `)?--/.test(l))
    .map((l) => /`(--[a-z-]+)/.exec(l.replace("`-h`, ", ""))![1]);
  assert.deepEqual(documented.sort(), flags.map((f) => `--${f}`).sort(), "the table lists exactly the agent's flags");
  for (const flag of flags) assert.ok(HELP.includes(`--${flag}`), `--help mentions --${flag}`);
  for (const [flag, value] of Object.entries(AGENT_DEFAULTS)) {
    assert.ok(row(`--${flag}`).includes(`| \`${value}\``), `docs: --${flag} defaults to ${value}`);
    assert.ok(HELP.includes(`(default ${value}`), `--help: --${flag} defaults to ${value}`);
  }
  for (const required of ["router", "region", "node-id", "url"]) assert.match(row(`--${required}`), /\| required +\|/);
});

test("both environment variables are documented", () => {
  assert.match(row(TOKEN_ENV), /\| required +\|/);
  assert.ok(row(ENGINE_KEY_ENV));
  for (const name of [TOKEN_ENV, ENGINE_KEY_ENV]) assert.ok(HELP.includes(name));
});

test("agent/Dockerfile runs the bundle, as a non-root user, from a context holding only the bundle", () => {
  const dockerfile = readFileSync(join(ROOT, "agent", "Dockerfile"), "utf8");
  const copy = /^COPY dist\/warmpath-agent\.mjs (\S+)$/m.exec(dockerfile);
  assert.ok(copy, "COPY dist/warmpath-agent.mjs (what npm run build:agent writes)");
  assert.ok(dockerfile.includes(`ENTRYPOINT ["node", "${copy[1]}"]`), "the entrypoint runs the copied file");
  const user = /^USER (\S+)$/m.exec(dockerfile)?.[1];
  assert.ok(user && user !== "root" && user !== "0", `USER ${user}`);
  assert.ok(dockerfile.indexOf(`USER ${user}`) < dockerfile.indexOf("ENTRYPOINT"));
  const ignore = readFileSync(join(ROOT, "agent", "Dockerfile.dockerignore"), "utf8")
    .split("\n")
    .filter((l) => l && !l.startsWith("#"));
  assert.deepEqual(ignore, ["*", "!dist/warmpath-agent.mjs"]);
});
