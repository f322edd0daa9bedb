/**
 * The runtime's floor for bench:wan: what workerd itself costs, on this machine, for the work any
 * router of warmpath's shape cannot avoid, with none of warmpath's own work. Run by bench/wan/floor.ts
 * in the workerd build and measurement bench:wan runs warmpath in; the mode is the `x-floor` header,
 * the node's base URL the `x-floor-node` header:
 *
 *   proxy   a worker that forwards the request to the node and returns its answer as the runtime
 *           gave it: no JavaScript touches the answer (workerd pumps it natively)
 *   relay   the same, the answer passed on chunk by chunk through JavaScript (a reader and one loop
 *           writing the runtime's identity stream, each write awaited, as src/proxy/relay.ts): what
 *           a router pays to read and filter every SSE event it relays
 *   pull    the same through a JavaScript ReadableStream of high-water mark 0 the runtime pulls
 *           from (src/proxy/relay.ts before it wrote the identity stream): what that choice saves
 *   hops    the path's hops, doing nothing at each: an edge that reads the body and calls a region
 *           worker over a service binding, whose worker calls a Durable Object twice over RPC (a
 *           placement and its completion, as the route session does), calls the node and relays the
 *           answer through JavaScript; the edge passes it on natively (src/edge/guard-stream.ts)
 *
 * This file is the worker's source (type-checked by bench/workerd/tsconfig.json with the Workers
 * types); its `.mts` extension keeps it out of bench/tsconfig.json, whose Node types it cannot use.
 */
import { DurableObject } from "cloudflare:workers";

interface FloorEnv {
  /** This worker again, over a service binding: the edge's binding to a region worker. */
  SELF: Fetcher;
  REGION: DurableObjectNamespace<FloorRegion>;
}

/** The region's object doing nothing: a placement counted and its completion, so the calls cost only themselves. */
export class FloorRegion extends DurableObject {
  private inFlight = 0;

  route(model: string): { node: number; model: string; inFlight: number } {
    this.inFlight++;
    return { node: 0, model, inFlight: this.inFlight };
  }

  complete(node: number): number {
    this.inFlight--;
    return node;
  }
}

/**
 * The node's answer passed on through JavaScript one chunk at a time, nothing read ahead of the
 * client: a loop writing the runtime's identity stream, whose write settles once the client read the
 * chunk (as src/proxy/relay.ts).
 */
function relayed(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  void (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return await writer.close();
        await writer.write(value);
      }
    } catch (e) {
      await reader.cancel(e).catch(() => {});
      await writer.abort(e).catch(() => {});
    }
  })();
  return readable;
}

/** The same through a JavaScript stream the runtime pulls from, one read per pull. */
function pulled(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

function callNode(request: Request, body: BodyInit | null): Promise<Response> {
  return fetch(`${request.headers.get("x-floor-node")}${new URL(request.url).pathname}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
}

export default {
  async fetch(request, env): Promise<Response> {
    switch (request.headers.get("x-floor")) {
      case "proxy":
        return callNode(request, request.body);
      case "relay": {
        const answer = await callNode(request, request.body);
        return new Response(answer.body && relayed(answer.body), answer);
      }
      case "pull": {
        const answer = await callNode(request, request.body);
        return new Response(answer.body && pulled(answer.body), answer);
      }
      case "hops": {
        const body = await request.arrayBuffer();
        const answer = await env.SELF.fetch(request.url, {
          method: "POST",
          headers: { "x-floor": "region", "x-floor-node": request.headers.get("x-floor-node")! },
          body,
        });
        return new Response(answer.body, answer);
      }
      case "region": {
        const region = env.REGION.get(env.REGION.idFromName("floor"));
        const placed = await region.route("m");
        const answer = await callNode(request, request.body);
        const response = new Response(answer.body && relayed(answer.body), answer);
        // What the object counted, for bench/test/wan-floor.test.ts: 1 when each placement was completed.
        response.headers.set("x-floor-in-flight", String(placed.inFlight));
        await region.complete(placed.node);
        return response;
      }
      default:
        return new Response("x-floor: proxy | relay | pull | hops", { status: request.method === "GET" ? 200 : 400 });
    }
  },
} satisfies ExportedHandler<FloorEnv>;
