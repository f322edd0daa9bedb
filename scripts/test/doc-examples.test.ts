/**
 * Every runnable example in README.md and docs/ works against `npm start`'s system: each `curl`
 * to the local router (http://127.0.0.1:8787 or localhost:8787) in a `sh` block, and each
 * JavaScript/TypeScript block that uses the OpenAI or Anthropic SDK, is extracted and run against
 * the same topology (scripts/system.ts, the simulated fleet), on a free port instead of 8787. A
 * curl must exit 0 with a 2xx status; a script must exit 0. Examples for a deployed router or
 * Cloudflare's API (other hosts) are left out. ~30 s.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { ROOT, startSystem } from "../system.ts";
import { freePort } from "../ports.ts";

const run = promisify(execFile);
const LOCAL = /https?:\/\/(?:127\.0\.0\.1|localhost):8787/g;

interface Example {
  file: string;
  line: number;
  kind: "curl" | "script";
  code: string;
}

/** Fenced blocks of a Markdown text: their language, first line number and body. */
function blocks(text: string): Array<{ lang: string; line: number; body: string }> {
  const out: Array<{ lang: string; line: number; body: string }> = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !lines[i]!.startsWith("```"); i++) body.push(lines[i]!);
    out.push({ lang: open[1]!, line: start + 1, body: body.join("\n") });
  }
  return out;
}

/**
 * The commands of a shell block: a line ending in `\` goes on, and so does a single-quoted string
 * left open (a JSON body over several lines); a comment after the command is dropped.
 */
function shellCommands(body: string): string[] {
  const out: string[] = [];
  let current = "";
  let continued = false;
  for (const line of body.split("\n")) {
    current = continued ? current + line.trimStart() : current ? current + "\n" + line : line;
    continued = false;
    const quotes = (current.match(/'/g) ?? []).length;
    if (quotes % 2 === 1) continue;
    if (/\\\s*$/.test(current)) {
      current = current.replace(/\s*\\\s*$/, " ");
      continued = true;
      continue;
    }
    out.push(quotes === 0 ? current.replace(/\s+#.*$/, "") : current);
    current = "";
  }
  return out;
}

/** The runnable examples of one Markdown file. */
export function examplesOf(file: string, text: string): Example[] {
  const out: Example[] = [];
  for (const b of blocks(text)) {
    if (["sh", "bash", "shell", ""].includes(b.lang)) {
      for (const c of shellCommands(b.body)) {
        const cmd = c.trim();
        if (cmd.startsWith("curl ") && LOCAL.test(cmd)) out.push({ file, line: b.line, kind: "curl", code: cmd });
        LOCAL.lastIndex = 0;
      }
    } else if (["js", "javascript", "ts", "typescript", "mjs"].includes(b.lang) && /from "(openai|@anthropic-ai\/sdk)"/.test(b.body)) {
      out.push({ file, line: b.line, kind: "script", code: b.body });
    }
  }
  return out;
}

function allExamples(): Example[] {
  const files = [
    "README.md",
    ...readdirSync(join(ROOT, "docs"))
      .filter((f) => f.endsWith(".md"))
      .map((f) => join("docs", f)),
  ];
  return files.flatMap((f) => examplesOf(f, readFileSync(join(ROOT, f), "utf8")));
}

test("the example extractor finds curl commands and SDK scripts, and leaves other hosts out", () => {
  const md = [
    "```sh",
    "curl -N http://127.0.0.1:8787/v1/models \\",
    '  -H "Authorization: Bearer k"   # a comment',
    "curl https://warmpath.example.com/v1/models",
    "```",
    "```js",
    'import OpenAI from "openai";',
    "```",
  ].join("\n");
  const found = examplesOf("x.md", md);
  assert.equal(found.length, 2);
  assert.equal(found[0]!.code, 'curl -N http://127.0.0.1:8787/v1/models -H "Authorization: Bearer k"');
  assert.equal(found[1]!.kind, "script");
});

test("every runnable example in README.md and docs/ works against the local system", { timeout: 180_000 }, async () => {
  const examples = allExamples();
  assert.ok(examples.length >= 1, "README.md shows at least the quick start's curl");
  const port = await freePort();
  const system = await startSystem({ port });
  const dir = mkdtempSync(join(ROOT, ".tmp-doc-examples-"));
  try {
    const base = `http://127.0.0.1:${port}`;
    for (const [i, ex] of examples.entries()) {
      const where = `${ex.file}:${ex.line}`;
      const code = ex.code.replace(LOCAL, base);
      if (ex.kind === "curl") {
        // -s: no progress meter; -w: the status, which -i alone does not always put last.
        const { stdout } = await run("sh", ["-c", `${code} -s -o /dev/null -w '%{http_code}'`], { timeout: 30_000 }).catch((e: Error) => {
          throw new Error(`${where}: ${e.message}`);
        });
        assert.match(stdout.trim(), /^2\d\d$/, `${where}: HTTP ${stdout.trim()}`);
      } else {
        // Written inside the repository, so the SDKs resolve from its node_modules.
        const file = join(dir, `example-${i}.mts`);
        writeFileSync(file, code);
        await run(process.execPath, [file], { cwd: ROOT, timeout: 30_000 }).catch((e: Error & { stderr?: string }) => {
          throw new Error(`${where}: ${e.message}\n${e.stderr ?? ""}`);
        });
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await system.stop();
  }
});
