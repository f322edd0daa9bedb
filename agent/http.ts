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
  /** The whole request, from connecting to the end of the body (not an idle timeout). */
  timeoutMs: number;
  /** Bodies past this many bytes are refused (an error), not buffered; default 16 MiB. */
  maxBytes?: number;
  /** Aborts the request (e.g. on shutdown, so a slow peer does not delay the deregistration): it rejects with code ABORT_ERR. */
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

/**
 * One request, settled within `timeoutMs` from its start whatever the peer does: the timer covers
 * connecting, the status line and the whole body, so a peer dripping a byte at a time cannot hold
 * the caller (node's own `timeout` option is an idle timeout, reset by every byte). `signal`
 * aborts it at once.
 */
export function httpRequestText(url: string, o: HttpOptions): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      reject(new Error(`invalid URL ${redactUrl(url)}`));
      return;
    }
    if (o.signal?.aborted) {
      reject(new ConnectionError("aborted", "ABORT_ERR"));
      return;
    }
    const send = u.protocol === "https:" ? httpsRequest : httpRequest;
    const maxBytes = o.maxBytes ?? DEFAULT_MAX_BYTES;
    let settled = false;
    const timer = setTimeout(() => fail(new ConnectionError(`timed out after ${o.timeoutMs} ms`, "ETIMEDOUT")), o.timeoutMs);
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
      return true;
    };
    /** Rejects with `err` (once) and tears the request and its socket down. */
    const fail = (err: Error) => {
      if (settle()) reject(err instanceof ConnectionError ? err : new ConnectionError(err.message, (err as NodeJS.ErrnoException).code));
      req.destroy();
    };
    const req = send(u, { method: o.method ?? "GET", headers: o.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size > maxBytes) {
          fail(new Error(`response larger than ${maxBytes} bytes`));
          return;
        }
        chunks.push(c);
      });
      res.on("end", () => {
        if (settle()) resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") });
      });
      res.on("error", fail);
      // Closed before "end" (after it, the request has settled and this does nothing).
      res.on("close", () => fail(new ConnectionError("connection closed before the end of the response", "ECONNRESET")));
    });
    const onAbort = () => fail(new ConnectionError("aborted", "ABORT_ERR"));
    o.signal?.addEventListener("abort", onAbort, { once: true });
    req.on("error", (err: NodeJS.ErrnoException) => fail(err.message ? err : new ConnectionError(String(err.code), err.code)));
    req.end(o.body);
  });
}

/**
 * `url` without its user name and password (`http://user:secret@host/metrics` ->
 * `http://host/metrics`), for log lines and error messages: an engine URL may carry basic-auth
 * credentials. Anything that does not parse as a URL is returned with everything up to an `@`
 * before the path removed.
 */
export function redactUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i, "$1");
  }
  if (!u.username && !u.password) return url;
  u.username = "";
  u.password = "";
  // URL adds a "/" to a bare origin: keep the form it was given in.
  return /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*$/i.test(url) ? u.href.replace(/\/$/, "") : u.href;
}

/** The first line of an error body, for a log line (bounded: a body may be a whole HTML page). */
export function briefBody(text: string): string {
  const line = text.trim().split("\n", 1)[0] ?? "";
  return line.length > 200 ? line.slice(0, 200) + "..." : line;
}
