/**
 * What a simulated benchmark's figures were computed from: a digest of the sources its entry
 * imports, directly or through other modules of this repository, so that a reader of a result file
 * can tell whether the tree in front of it would compute the same figures. bench/goodput.ts writes
 * it into goodput.json (`source`), and bench/goodput-heldout.ts takes the committed draw's column
 * from that file only when the digest is its own tree's: a held-out run on a branch that changed
 * the router used to set the branch's draws beside main's committed draw without a word.
 *
 * The modules imported, not the whole tree: a change to the edge's logging or to another benchmark
 * cannot move these figures, and must not make a result file read as stale. Found by reading each
 * module's relative specifiers of module files (after `from`, `import(`, `require(`, `new Worker(`
 * or `new URL(`, quoted), which every module here names with its extension; one named only in a
 * comment is taken too (over-inclusive is safe: a stale verdict costs a rerun, a missed module a false
 * figure); one that names no file is an error. Paths are relative and sorted, each file hashed with
 * its path and length, so the digest is the same on every clone (a checkout that rewrites line
 * endings reads as other sources: a rerun, never a false match). Dependencies in node_modules are
 * not digested: their versions are pinned by package-lock.json.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

/** Hex digits kept: 64 bits, far past any chance of two trees meeting by accident. */
const DIGEST_HEX = 16;
/**
 * A relative specifier of a module file (.ts, .mts, .js, .mjs or .json: a directory or a path in
 * prose is not a module), quoted (a template literal without a substitution too), in an
 * import, an export, a dynamic import, a `require`, a `new Worker(...)` or a `new URL(...,
 * import.meta.url)`.
 */
const SPECIFIER =
  /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*|\bnew\s+(?:URL|Worker)\s*\(\s*)(["'`])(\.{1,2}\/[^"'`$\n]+\.(?:m?[jt]s|json))\1/g;

/** The modules `entries` (paths relative to `root`) import within the repository, themselves included: relative, `/`-separated, sorted. */
export function importedModules(root: string, entries: readonly string[]): string[] {
  const seen = new Set<string>();
  const isFile = (path: string) => existsSync(path) && statSync(path).isFile();
  const visit = (path: string) => {
    if (seen.has(path)) return;
    seen.add(path);
    const text = readFileSync(path, "utf8");
    for (const m of text.matchAll(SPECIFIER)) {
      const spec = m[2]!;
      const named = resolve(dirname(path), spec);
      // TypeScript's convention: `./x.js` names `./x.ts` when only that exists.
      const ts = named.replace(/\.(m?)js$/, ".$1ts");
      const target = !isFile(named) && isFile(ts) ? ts : named;
      // A specifier that names no file fails loudly: missed silently, a module's change would not
      // change the digest (a false figure read as current), where a rerun costs minutes.
      if (!isFile(target)) throw new Error(`${relative(root, path)} names ${spec}, which is not a file: the digest would miss it`);
      visit(target);
    }
  };
  for (const e of entries) {
    const path = resolve(root, e);
    if (!isFile(path)) throw new Error(`${e}: no such module under ${root}`);
    visit(path);
  }
  return [...seen].map((p) => relative(root, p).split(sep).join("/")).sort();
}

/** The digest of the modules `entries` import under `root` (the repository): {@link DIGEST_HEX} hex digits of SHA-256. */
export function sourceDigest(root: string, entries: readonly string[]): string {
  const hash = createHash("sha256");
  for (const file of importedModules(root, entries)) {
    const body = readFileSync(join(root, file));
    // Path and length before the bytes: no two different trees hash the same stream.
    hash.update(`${file}\0${body.byteLength}\0`);
    hash.update(body);
  }
  return hash.digest("hex").slice(0, DIGEST_HEX);
}

/** bench/goodput.ts, whose sources decide goodput.json's figures (its worker threads run its own modules). */
export const GOODPUT_ENTRY = "bench/goodput.ts";
