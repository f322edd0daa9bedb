/**
 * Builds warmpath-agent into one file to copy onto a GPU host: `dist/warmpath-agent.mjs`.
 *
 *   npm run build:agent        (node scripts/build-agent.ts [--out FILE] [--quiet])
 *
 * The agent's sources (agent/) are TypeScript that only Node 22.18+ runs as is, and the package
 * needs its dev dependencies for that Node. The bundle is plain JavaScript for Node 18+: every
 * module it imports bundled in (esbuild, target node18), nothing at run time but Node's own
 * `node:` modules, a `#!/usr/bin/env node` first line and the executable bit. What it may not use
 * (an API newer than Node 18) is checked by running it: scripts/test/agent-bundle.test.ts runs the
 * file alone in an empty folder with the system's Node 20 against a local router. docs/AGENT.md
 * says how to install and run it.
 *
 * Prints the file, its size and its sha256; fails if it is over 5 MB, or if anything outside
 * agent/ ended up in it (the agent speaks the router's wire format, it does not share its code:
 * a type-only import such as src/contracts/node.ts's NodeReport leaves nothing in the bundle).
 */
import { createHash } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { build } from "esbuild";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const AGENT_ENTRY = join(ROOT, "agent", "warmpath-agent.ts");
export const AGENT_BUNDLE = join(ROOT, "dist", "warmpath-agent.mjs");
/** The oldest Node the bundle targets (its syntax is lowered to it; docs/AGENT.md states it). */
export const AGENT_NODE_TARGET = "node18";
export const MAX_BUNDLE_BYTES = 5 * 1024 * 1024;

export interface AgentBundle {
  file: string;
  bytes: number;
  sha256: string;
  /** The source files in the bundle, relative to the repository. */
  inputs: string[];
}

export async function buildAgent(outfile: string = AGENT_BUNDLE): Promise<AgentBundle> {
  mkdirSync(dirname(outfile), { recursive: true });
  const result = await build({
    entryPoints: [AGENT_ENTRY],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: AGENT_NODE_TARGET,
    // The entry's own `#!/usr/bin/env node` is carried over by esbuild as the first line.
    banner: { js: "// warmpath-agent: built by scripts/build-agent.ts from agent/ (docs/AGENT.md). Node 18+, no dependencies." },
    // Readable on the host it runs on; a few tens of kB either way.
    minify: false,
    sourcemap: false,
    legalComments: "inline",
    metafile: true,
    logLevel: "warning",
  });
  const inputs = Object.keys(result.metafile.inputs).map((p) => relative(ROOT, resolve(ROOT, p)));
  const foreign = inputs.filter((p) => !p.startsWith(`agent${"/"}`));
  if (foreign.length) {
    // Not an error of esbuild's: a deliberate check that the agent stays independent of the router's
    // code and of npm packages (one would have to be audited for Node 18 and bundled knowingly).
    throw new Error(`the agent bundle pulled in code from outside agent/: ${foreign.join(", ")}`);
  }
  chmodSync(outfile, 0o755);
  const content = readFileSync(outfile);
  const bytes = statSync(outfile).size;
  if (!content.subarray(0, 20).toString("utf8").startsWith("#!/usr/bin/env node\n")) {
    throw new Error(`${outfile} does not start with #!/usr/bin/env node`);
  }
  if (bytes > MAX_BUNDLE_BYTES) throw new Error(`${outfile} is ${bytes} bytes, over the ${MAX_BUNDLE_BYTES} limit`);
  return { file: outfile, bytes, sha256: createHash("sha256").update(content).digest("hex"), inputs };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { out: { type: "string" }, quiet: { type: "boolean", default: false } } });
  const bundle = await buildAgent(values.out ? resolve(values.out) : AGENT_BUNDLE);
  if (values.quiet) return;
  console.log(`built ${relative(process.cwd(), bundle.file) || bundle.file}`);
  console.log(`  size    ${bundle.bytes} bytes (${(bundle.bytes / 1024).toFixed(1)} KiB; limit ${MAX_BUNDLE_BYTES / 1024 / 1024} MB)`);
  console.log(`  sha256  ${bundle.sha256}`);
  console.log(`  from    ${bundle.inputs.length} files of agent/; runs on Node 18+ with no node_modules`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e: unknown) => {
    console.error(`build-agent: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  });
}
