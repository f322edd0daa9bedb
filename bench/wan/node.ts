/**
 * The GPU node of the long-haul benchmark: an OpenAI-compatible server of no model time that
 * answers a streamed chat completion at once (its headers and first event together), or refuses
 * every request with 503 (the node a retry passes over). What is measured is the path, not a model.
 */
import { createServer, type Server } from "node:http";

export interface BenchNode {
  url: string;
  /** Requests it received. */
  readonly received: number;
  close(): Promise<void>;
}

const CHUNK = (id: string) =>
  `data: {"id":"${id}","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}\n\n`;
const LAST = `data: {"id":"x","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":1,"total_tokens":51}}\n\ndata: [DONE]\n\n`;

/**
 * `answer`: the first event and the last (usage, [DONE]) in one write; `{ events: n }`: a stream of
 * n content events, each written on its own (the next after a turn of the event loop), as a model
 * node emits tokens, so each reaches the router as a chunk of its own (bench:wan's relay cost per
 * SSE event); `refuse`: 503 to every request.
 */
export async function startNode(mode: "answer" | "refuse" | { events: number }): Promise<BenchNode> {
  let received = 0;
  let seq = 0;
  const server: Server = createServer((req, res) => {
    received++;
    req.resume();
    req.on("end", () => {
      if (mode === "refuse") {
        res.writeHead(503, { "content-type": "application/json" });
        return res.end('{"error":{"message":"overloaded","type":"server_error","code":"overloaded","param":null}}');
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      if (mode === "answer") return res.end(CHUNK(`c${seq++}`) + LAST);
      void (async () => {
        const id = `c${seq++}`;
        for (let i = 0; i < mode.events; i++) {
          res.write(CHUNK(id));
          await new Promise((r) => setImmediate(r));
        }
        res.end(LAST);
      })();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    get received() {
      return received;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
