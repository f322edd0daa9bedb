/**
 * What `npm test` repeats at its end about each failed test, from the reports the test runners
 * write: CI keeps only the tail of the output, so a failure's name and error must be there, not
 * only where the runner printed it minutes earlier.
 */

/** The part of vitest's JSON report (`--reporter=json`) read here. */
export interface VitestReport {
  numPassedTests: number;
  numFailedTests: number;
  numFailedTestSuites?: number;
  testResults?: {
    name: string;
    status?: string;
    message?: string;
    assertionResults?: { fullName: string; status: string; failureMessages?: string[] }[];
  }[];
}

/** Each failed vitest test as `file: name` and its error's first lines; a file that failed outside any test too. */
export function vitestFailures(r: VitestReport): string[] {
  const out: string[] = [];
  for (const file of r.testResults ?? [])
    for (const t of file.assertionResults ?? [])
      if (t.status === "failed") out.push(`${file.name}: ${t.fullName}\n${firstLines(t.failureMessages?.join("\n") ?? "")}`);
  for (const file of r.testResults ?? [])
    if (file.status === "failed" && !(file.assertionResults ?? []).some((t) => t.status === "failed"))
      out.push(`${file.name}: failed outside any test\n${firstLines(file.message ?? "")}`);
  return out;
}

/** At most 8 lines of an error, indented under its test. */
export function firstLines(text: string): string {
  return text
    .split("\n")
    .filter((l) => l.trim())
    .slice(0, 8)
    .map((l) => `    ${l.trim()}`)
    .join("\n");
}

/**
 * The `not ok` entries of a TAP stream (node --test), at any depth, each with its YAML block's
 * location, failure type and error. A file whose process exits non-zero after its tests passed (an
 * error thrown once a test had ended, a handle left open) is one of them: the file's own entry.
 */
export function tapFailures(text: string): string[] {
  const lines = text.split("\n");
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    // An error after its test ended is reported as a diagnostic (the test itself passed) and fails the file.
    if (/^\s*# (Error|Warning):/.test(lines[i]!)) out.push(lines[i]!.trim().slice(2, 600));
    const m = /^(\s*)not ok \d+ - (.*)$/.exec(lines[i]!);
    if (!m) continue;
    const detail: string[] = [];
    let keyIndent = -1; // the indentation of a kept key whose value continues on the lines below (`error: |-`)
    for (let j = i + 1; j < lines.length && j < i + 60; j++) {
      const l = lines[j]!;
      if (/^\s*\.\.\.$/.test(l)) break;
      const indent = l.length - l.trimStart().length;
      if (keyIndent >= 0 && indent > keyIndent) {
        detail.push(l);
        continue;
      }
      keyIndent = -1;
      if (/^\s*(location|failureType|error|exitCode|signal):/.test(l)) {
        detail.push(l);
        if (/:\s*[|>]-?\s*$/.test(l)) keyIndent = indent;
      }
    }
    out.push(`${m[2]}\n${firstLines(detail.join("\n"))}`);
  }
  return out;
}
