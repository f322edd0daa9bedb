/**
 * The router's log lines about a scenario's requests, by request id: kept to show with a problem,
 * and the `stream_continued` lines (src/contracts/decision-line.ts) for the notes.
 */
import { parseLogLine, type StreamContinuedLine } from "../../src/contracts/decision-line.ts";
import { quantiles } from "./quantiles.ts";

/**
 * The router's log lines about requests, by request id (a tag: each request sends its own as
 * `x-request-id`): `stream_continued`, the relay's, the decision lines of requests that did not end
 * cleanly or were continued, and the `refusal` lines of those no node answered (workerd prints the
 * workers' console lines; scripts/system.ts passes them on line by line). Shown with a problem,
 * never counted: refusal lines and a node's own errors' decision lines are bounded per second.
 */
export const routerLog = new Map<string, string[]>();

export function keepRouterLine(line: string): void {
  const parsed = parseLogLine(line);
  if (!parsed || typeof parsed.json.request_id !== "string") return;
  const d = parsed.decision;
  const clean = d !== undefined && d.status < 400 && (d.end === undefined || d.end === "ok") && d.continuations === undefined;
  if (clean) return;
  const lines = routerLog.get(parsed.json.request_id) ?? [];
  lines.push(line.slice(line.indexOf("{")));
  routerLog.set(parsed.json.request_id, lines);
}

/** The `stream_continued` lines logged for a request (src/contracts/decision-line.ts). */
export function continuedLines(tag: string): StreamContinuedLine[] {
  return (routerLog.get(tag) ?? []).flatMap((l) => parseLogLine(l)?.continued ?? []);
}

/** A scenario's continuations for the notes: the tokens carried and the gap the client saw, from the router's log. */
export function continuationNotes(tags: readonly string[]): string {
  const lines = tags.flatMap(continuedLines);
  if (lines.length === 0) return "";
  const carried = quantiles(lines.map((l) => l.tokens_carried));
  const gap = quantiles(lines.map((l) => l.first_byte_ms));
  return (
    `continued after ${carried.p50.toFixed(0)} tokens p50 (${carried.max.toFixed(0)} max); ` +
    `the next node's first byte ${gap.p50.toFixed(0)} ms p50 / ${gap.max.toFixed(0)} ms max after the failure`
  );
}
