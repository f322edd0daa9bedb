/**
 * The naive prefix-affinity router the live goodput benchmark compares warmpath with: the common
 * way to get KV-cache reuse without a cache-aware router, written honestly and nothing more.
 *
 * What it does, all of it:
 * - Reads the request body (an OpenAI chat completion, or a completion's `prompt`) and takes the
 *   first `prefixChars` characters of its prompt text: the messages' contents in order (text
 *   parts of array contents joined), or the completion prompt.
 * - Picks the node by rendezvous (highest-random-weight) hashing of that key over the node ids:
 *   each node's score is the first 8 bytes of SHA-256(node id, key), the highest wins. The same
 *   prefix always goes to the same node, and a node's share of keys is 1/n.
 * - Forwards the request to that node unchanged (same path, method, body, content type) and
 *   streams the node's answer back as it comes (status, headers and every byte), adding
 *   `x-naive-node` (the node's id).
 * - Nothing else: no load awareness (a busy node gets its keys all the same), no admission, no
 *   queue of its own, no timeouts, no retries (but one: a request whose kept-alive connection
 *   the node had just closed, which never reached it, is sent again on a new connection, Node's
 *   documented remedy). A node it cannot reach is a 502 in OpenAI's error shape
 *   (`upstream_unreachable`); a client that goes away closes the node's request too, as a proxy
 *   does (the node then drops it from its queue).
 *
 * With the Mooncake workload's default of 4,096 characters (about 1,024 tokens) the key covers
 * the system block every request shares (2,048 characters) and the start of the conversation's
 * own first block: the router keeps each conversation on one node, which is the most reuse this
 * approach can get on this trace (a key inside the shared system block would send every request
 * to one node).
 *
 * Runs in a process of its own, as a deployed proxy would:
 *   node bench/goodput-live/naive-router.ts --port 8790 --node id=http://127.0.0.1:P [--node ...] [--prefix-chars 4096]
 * It prints one JSON line `{"event":"listening","url":...}` when it is up.
 */
import { createHash } from "node:crypto";
import {
  Agent,
  createServer,
  request as httpRequest,
  type ClientRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";

export interface NaiveNode {
  id: string;
  url: string;
}

/** The prompt text the key is cut from: the messages' contents in order, or the completion prompt. */
export function promptText(body: unknown): string {
  if (!body || typeof body !== "object") return "";
  const b = body as { messages?: unknown; prompt?: unknown };
  if (Array.isArray(b.messages)) {
    let out = "";
    for (const m of b.messages as Array<{ content?: unknown }>) {
      const c = m?.content;
      if (typeof c === "string") out += c;
      else if (Array.isArray(c)) for (const p of c as Array<{ text?: unknown }>) if (typeof p?.text === "string") out += p.text;
    }
    return out;
  }
  if (typeof b.prompt === "string") return b.prompt;
  if (Array.isArray(b.prompt) && typeof b.prompt[0] === "string") return b.prompt[0];
  return "";
}

/** The node rendezvous hashing gives `key`: the highest SHA-256(node id, key), first 8 bytes. */
export function pickNode<T extends { id: string }>(key: string, nodes: readonly T[]): T {
  let best: T | undefined;
  let bestScore = -1n;
  for (const n of nodes) {
    const score = createHash("sha256").update(n.id).update("\0").update(key).digest().readBigUInt64BE(0);
    if (score > bestScore) {
      best = n;
      bestScore = score;
    }
  }
  if (!best) throw new Error("no nodes");
  return best;
}

function sendError(res: ServerResponse, status: number, message: string, type: string, code: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify({ error: { message, type, param: null, code } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** Starts the proxy on 127.0.0.1:`port` (0: any). */
export async function startNaiveRouter(
  nodes: readonly NaiveNode[],
  options: { port?: number; prefixChars?: number } = {},
): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const prefixChars = options.prefixChars ?? 4096;
  const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
  const handle = (req: IncomingMessage, res: ServerResponse, raw: Buffer) => {
    let parsed: unknown;
    try {
      parsed = raw.length ? JSON.parse(raw.toString("utf8")) : undefined;
    } catch {
      return sendError(res, 400, "The body is not JSON.", "invalid_request_error", "invalid_json");
    }
    const node = pickNode(promptText(parsed).slice(0, prefixChars), nodes);
    const target = new URL(req.url ?? "/", node.url);
    const headers: Record<string, string | string[]> = {};
    for (const name of ["content-type", "accept", "authorization"]) {
      const v = req.headers[name];
      if (v !== undefined) headers[name] = v;
    }
    headers["content-length"] = String(raw.length);
    let upstream: ClientRequest | undefined;
    // The client went away before the answer ended: so does the node's request.
    res.on("close", () => {
      if (!res.writableFinished) upstream?.destroy();
    });
    const send = (retry: boolean) => {
      let answered = false;
      const u = httpRequest(target, { method: req.method, headers, agent }, (up) => {
        answered = true;
        const out: Record<string, string | string[]> = { "x-naive-node": node.id };
        for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && k !== "connection" && k !== "keep-alive") out[k] = v;
        res.writeHead(up.statusCode ?? 502, out);
        up.pipe(res);
        up.on("error", () => res.destroy());
      });
      upstream = u;
      u.on("error", (e) => {
        if (res.destroyed || answered) return;
        // A kept-alive connection the node closed just as it was reused: the request never reached
        // the node, and Node's documented remedy is to send it again on a new connection (once).
        if (retry && u.reusedSocket) return send(false);
        sendError(res, 502, `node ${node.id} could not be reached: ${e.message}`, "api_error", "upstream_unreachable");
      });
      u.end(raw);
    };
    send(true);
  };
  const server = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/health") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ nodes: nodes.map((n) => n.id), prefix_chars: prefixChars }));
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => handle(req, res, Buffer.concat(chunks)));
    req.on("error", () => res.destroy());
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
        agent.destroy();
      }),
  };
}

// As a process of its own.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      port: { type: "string", default: "0" },
      node: { type: "string", multiple: true, default: [] },
      "prefix-chars": { type: "string", default: "4096" },
    },
  });
  const nodes = values.node.map((s) => {
    const at = s.indexOf("=");
    return { id: s.slice(0, at), url: s.slice(at + 1) };
  });
  const router = await startNaiveRouter(nodes, { port: Number(values.port), prefixChars: Number(values["prefix-chars"]) });
  console.log(JSON.stringify({ event: "listening", url: router.url }));
  const stop = () => void router.close().then(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
