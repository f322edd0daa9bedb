/**
 * A long haul on loopback: a TCP relay that holds every chunk for half the emulated round trip in
 * each direction before passing it on, in order. No bandwidth or loss model: the requests and
 * answers measured here are a few kilobytes, where the round trip is what a long haul costs.
 * Connection setup crosses it too (the SYN is local, but nothing reaches the far side before the
 * client's first bytes, delayed), as a warm keep-alive connection's requests do.
 */
import { createServer, connect, type Server, type Socket } from "node:net";

export interface Relay {
  port: number;
  close(): Promise<void>;
}

/** Relays 127.0.0.1:<returned port> to `target`, adding `roundTripMs` (half each way). */
export async function startRelay(target: { host: string; port: number }, roundTripMs: number): Promise<Relay> {
  const oneWay = roundTripMs / 2;
  const sockets = new Set<Socket>();
  const pipe = (from: Socket, to: Socket) => {
    // Equal delays fire in the order they were set: the bytes keep their order.
    const later = (f: () => void) => (oneWay > 0 ? setTimeout(f, oneWay) : f());
    from.on("data", (chunk) => later(() => to.writable && to.write(chunk)));
    from.on("end", () => later(() => to.end()));
    from.on("error", () => later(() => to.destroy()));
    from.on("close", () => later(() => to.destroy()));
  };
  const server: Server = createServer((client) => {
    client.setNoDelay(true);
    const upstream = connect(target.port, target.host);
    upstream.setNoDelay(true);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
    }
    pipe(client, upstream);
    pipe(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
