/**
 * agent/Dockerfile, as far as a machine without a Docker engine can check it (this one has the
 * client only: `docker build` needs the engine, and the base image a registry this machine does not
 * reach). The build is followed step by step: the build context its .dockerignore leaves (the
 * bundle alone), each COPY's source in that context, the base image a Node the bundle supports, the
 * state folder created, owned by the unprivileged user and declared a volume, and the image's
 * command (ENTRYPOINT + CMD) run as the image would run it, on a Node older than 22, against the
 * file where COPY put it. What only a real build shows (the base image's `node` user and its
 * `chown`) is left to `docker build -f agent/Dockerfile .` (docs/AGENT.md).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { AGENT_BUNDLE } from "../build-agent.ts";
import { ROOT } from "../system.ts";

const OLD_NODE = process.env.WARMPATH_AGENT_TEST_NODE || "/usr/bin/node";

interface Instruction {
  op: string;
  args: string;
}

/** The Dockerfile's instructions: comments dropped, `\` continuations joined. */
function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let current = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!current && (line === "" || line.startsWith("#"))) continue;
    current += (current ? " " : "") + line.replace(/\\$/, "").trim();
    if (line.endsWith("\\")) continue;
    const [op, ...rest] = current.split(/\s+/);
    out.push({ op: op!.toUpperCase(), args: rest.join(" ") });
    current = "";
  }
  return out;
}

/**
 * A .dockerignore's verdict on a path, as Docker decides it: a pattern matches the path or a folder
 * above it (an excluded folder takes its contents), and the last matching pattern wins (`!`
 * re-includes).
 */
function ignored(patterns: string[], path: string): boolean {
  const parts = path.split("/");
  const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join("/"));
  let out = false;
  for (const p of patterns) {
    const negate = p.startsWith("!");
    const glob = negate ? p.slice(1) : p;
    const re = new RegExp(
      "^" +
        glob
          .replace(/[.+^${}()|[\]\\]/g, "\\$&")
          .replace(/\*\*/g, "\u0000")
          .replace(/\*/g, "[^/]*")
          .replace(/\u0000/g, ".*") +
        "$",
    );
    if (prefixes.some((prefix) => re.test(prefix))) out = !negate;
  }
  return out;
}

const exec = (args: string) => JSON.parse(args) as string[];

test("agent/Dockerfile builds an image of the bundle alone, whose command runs on a Node older than 22", () => {
  execFileSync(process.execPath, [join(ROOT, "scripts", "build-agent.ts")], { cwd: ROOT });
  const steps = instructions(readFileSync(join(ROOT, "agent", "Dockerfile"), "utf8"));
  const one = (op: string) => {
    const found = steps.filter((s) => s.op === op);
    assert.equal(found.length, 1, `one ${op}`);
    return found[0]!.args;
  };

  // The base image: Node's official image, of a Node the bundle runs on (18+).
  const image = /^NODE_IMAGE=(\S+)$/.exec(one("ARG"))?.[1];
  assert.ok(image, "ARG NODE_IMAGE=<image>");
  assert.equal(one("FROM"), "${NODE_IMAGE}");
  assert.ok(Number(/^node:(\d+)/.exec(image)?.[1]) >= 18, `${image}: Node 18 or later`);

  // The build context: everything the repository holds, less what the .dockerignore leaves out.
  const patterns = readFileSync(join(ROOT, "agent", "Dockerfile.dockerignore"), "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
  // The repository's files, and what git ignores but a build context would hold (node_modules, .tmp).
  const files = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard"], {
    cwd: ROOT,
    encoding: "utf8",
    maxBuffer: 64 << 20,
  })
    .split("\n")
    .filter(Boolean)
    .concat(["node_modules/hono/package.json", ".tmp/bench-quick/results.json", ".git/HEAD"]);
  const bundle = relative(ROOT, AGENT_BUNDLE);
  const context = [...new Set([...files, bundle])].filter((f) => !ignored(patterns, f));
  assert.deepEqual(context, [bundle], "the build context is the bundle alone");

  // COPY: from the context to where the command runs it.
  const [source, destination] = one("COPY").split(/\s+/) as [string, string];
  assert.ok(context.includes(source), `COPY ${source}: in the build context`);
  const entrypoint = exec(one("ENTRYPOINT"));
  const cmd = exec(one("CMD"));
  assert.deepEqual(entrypoint, ["node", destination], "ENTRYPOINT runs the copied bundle with the image's node");

  // The state folder: made by RUN, owned by the unprivileged user, the working directory, a volume.
  const state = one("WORKDIR");
  assert.match(one("RUN"), new RegExp(`mkdir -p ${state} && chown node:node ${state} && chmod 0700 ${state}`));
  assert.equal(one("USER"), "node");
  assert.deepEqual(exec(one("VOLUME")), [state]);
  assert.equal(one("STOPSIGNAL"), "SIGTERM", "docker stop sends what the agent deregisters on");

  // The image's command, as the image runs it: its file system holds the bundle at COPY's
  // destination and nothing else of this repository; its node is older than 22.
  const root = mkdtempSync(join(tmpdir(), "warmpath-agent-image-"));
  try {
    const file = join(root, destination);
    mkdirSync(dirname(file), { recursive: true });
    copyFileSync(join(ROOT, source), file);
    mkdirSync(join(root, state), { recursive: true });
    const version = execFileSync(OLD_NODE, ["--version"], { encoding: "utf8" }).trim();
    assert.ok(Number(/^v(\d+)/.exec(version)?.[1]) < 22, `${OLD_NODE} is ${version}`);
    const out = execFileSync(OLD_NODE, [file, ...cmd], { cwd: join(root, state), env: { PATH: dirname(OLD_NODE) }, encoding: "utf8" });
    assert.match(out, /^warmpath-agent: reports an inference server's load to a warmpath router\./);
    assert.match(out, /--router/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
