/**
 * A plain reverse proxy: the yardstick bench/e2e holds the router's own time against under load
 * (issue 32: "its own time under load stays within a few times a plain proxy's").
 *
 *   node bench/e2e/plain-proxy.ts --upstream http://127.0.0.1:PORT [--upstream ...] [--port 0]
 *
 * What a minimal production-grade Node.js proxy does and nothing more: node:http on both sides, a
 * keep-alive agent to the upstreams (so, like the router's fetch from workerd, it reuses warm
 * connections), the request and response bodies streamed through as they arrive (a streamed
 * answer's events leave as they come, never buffered), hop-by-hop headers dropped both ways, a
 * 502 in OpenAI's error shape if the upstream cannot be reached. No routing, authentication,
 * parsing or logging: the upstreams are taken in turn, as the benchmark's direct path takes the
 * nodes, so both put the same load on each node. It runs as a process of its own, so the
 * benchmark reads its CPU from /proc exactly as it reads the router's.
 *
 * Prints one line, `plain-proxy listening on http://127.0.0.1:PORT`, once it listens; exits at the end
 * of its stdin.
 */
import http from "node:http";
import { parseArgs } from "node:util";

const { values: flags } = parseArgs({
  options: {
    port: { type: "string", default: "0" },
    upstream: { type: "string", multiple: true, default: [] },
  },
});

/** Sockets per upstream: above any concurrency the benchmark reaches before it sheds (256 in flight a path). */
const MAX_SOCKETS = 1024;

/**
 * Hop-by-hop headers (RFC 9110 7.6.1): they describe one connection, not the message, so a proxy
 * must not forward them; node:http sets its own for each side.
 */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"]);

function endToEnd(headers: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  return out;
}

const upstreams = flags.upstream.map((u) => new URL(u));
if (upstreams.length === 0) {
  console.error("plain-proxy: at least one --upstream URL is required");
  process.exit(2);
}
const agent = new http.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS, maxFreeSockets: MAX_SOCKETS });
let turn = 0;

const server = http.createServer((req, res) => {
  const target = upstreams[turn++ % upstreams.length]!;
  const headers = endToEnd(req.headers);
  headers.host = target.host;
  const upstream = http.request(
    { host: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers));
      answer.pipe(res);
    },
  );
  upstream.on("error", (e) => {
    if (res.headersSent) {
      res.destroy(e);
      return;
    }
    res.writeHead(502, { "content-type": "application/json" });
    res.end(
      JSON.stringify({ error: { message: `upstream unreachable: ${e.message}`, type: "api_error", code: "bad_gateway", param: null } }),
    );
  });
  // A client that goes away takes its upstream request with it.
  res.on("close", () => {
    if (!res.writableFinished) upstream.destroy();
  });
  req.pipe(upstream);
});
server.keepAliveTimeout = 60_000;
server.listen(Number(flags.port), "127.0.0.1", () => {
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : Number(flags.port);
  console.log(`plain-proxy listening on http://127.0.0.1:${port}`);
});
// Ends with the benchmark, however that ends: its stdin is a pipe from the benchmark, which the
// kernel closes when the benchmark dies (scripts/watchdog.ts's way).
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
process.on("SIGTERM", () => process.exit(0));
