/**
 * One HTTP request on a fresh connection, for the agent's two peers (the engine beside it and
 * the router). `agent: false`: fetch() would pool keep-alive sockets that outlive a shutdown by
 * seconds, and one request a second to each peer does not need connection reuse.
 */
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";

export interface HttpResponse {
  status: number;
  /** Lower-case header names, as node:http gives them. */
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export interface HttpOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  timeoutMs: number;
  /** Bodies past this many bytes are refused (an error), not buffered; default 16 MiB. */
  maxBytes?: number;
  /** Aborts the request (e.g. on shutdown, so a slow peer does not delay the deregistration). */
  signal?: AbortSignal;
}

/** An HTTP failure that never reached a status line; `code` is node's (ECONNREFUSED, ...). */
export class ConnectionError extends Error {
  readonly code: string | undefined;
  constructor(message: string, code: string | undefined) {
    super(message);
    this.code = code;
  }
}

const DEFAULT_MAX_BYTES = 16 * 1024 * 1024;

export function httpRequestText(url: string, o: HttpOptions): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      reject(new Error(`invalid URL ${url}`));
      return;
    }
    const send = u.protocol === "https:" ? httpsRequest : httpRequest;
    const maxBytes = o.maxBytes ?? DEFAULT_MAX_BYTES;
    const req = send(u, { method: o.method ?? "GET", headers: o.headers, agent: false, timeout: o.timeoutMs, signal: o.signal }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size > maxBytes) {
          req.destroy(new Error(`response larger than ${maxBytes} bytes`));
          return;
        }
        chunks.push(c);
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new ConnectionError(`timed out after ${o.timeoutMs} ms`, "ETIMEDOUT")));
    req.on("error", (err: NodeJS.ErrnoException) => {
      reject(err instanceof ConnectionError ? err : new ConnectionError(err.message || String(err.code), err.code));
    });
    req.end(o.body);
  });
}

/** The first line of an error body, for a log line (bounded: a body may be a whole HTML page). */
export function briefBody(text: string): string {
  const line = text.trim().split("\n", 1)[0] ?? "";
  return line.length > 200 ? line.slice(0, 200) + "..." : line;
}
