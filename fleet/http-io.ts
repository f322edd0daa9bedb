/**
 * Request and response plumbing shared by a node's endpoints: JSON answers, OpenAI-shaped
 * errors, redirects (a fault), and bounded body reading with JSON-object parsing (errors as
 * RequestError, which the route table turns into 4xx answers).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { errorBody } from "./openai.ts";
import { RequestError } from "./prompt.ts";

const MAX_BODY_BYTES = 32 * 1024 * 1024;

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** OpenAI's error answer; its `code` is the status (as vLLM's), unless the error names one. */
export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  type: string,
  param: string | null = null,
  code: string | number = status,
): void {
  sendJson(res, status, errorBody(message, type, param, code));
}

/** A 307 to `location`, named in the body too, as web servers' redirect pages do. */
export function sendRedirect(res: ServerResponse, location: string): void {
  const text = `Temporary Redirect. Redirecting to ${location}`;
  res.writeHead(307, { location, "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    req.on("data", (b: Buffer) => {
      size += b.length;
      if (size > MAX_BODY_BYTES) {
        reject(new RequestError("request body too large", null, 413));
        req.destroy();
      } else parts.push(b);
    });
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    req.on("error", reject);
  });
}

export function parseJsonObject(text: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new RequestError(`Invalid JSON body: ${(err as Error).message}`);
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) throw new RequestError("request body must be a JSON object");
  return v as Record<string, unknown>;
}
