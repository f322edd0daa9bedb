/**
 * The load generator's process (forked by run.ts): runs each command it is sent and sends back
 * the timings. A process of its own so that the simulated fleet, which answers every request in
 * the parent's event loop, never delays the client's clock.
 */
import { LoadGenerator, type LoadCommand } from "./load.ts";

/** Sockets per target: above any concurrency the steps reach before they shed. */
const MAX_SOCKETS = 1024;

const generator = new LoadGenerator(MAX_SOCKETS);
let queue = Promise.resolve();

process.on("message", (cmd: LoadCommand) => {
  // One command at a time, in order: the parent samples CPU around each.
  queue = queue.then(async () => {
    const result = await generator.run(cmd);
    process.send!(result);
  });
});
process.on("disconnect", () => process.exit(0));
