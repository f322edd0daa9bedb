/**
 * Starts bench/e2e/plain-proxy.ts as a process of its own (so its CPU is read from /proc like the
 * router's) in front of the given upstreams, and resolves once it listens.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), "plain-proxy.ts");
/** How long the proxy gets to say it listens (a Node.js start with type stripping: well under a second). */
const READY_TIMEOUT_MS = 10_000;

export interface PlainProxy {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

export function startPlainProxy(upstreams: string[]): Promise<PlainProxy> {
  // stdin is a pipe the proxy watches: it exits when this process ends, however that ends.
  const child = spawn(process.execPath, [SCRIPT, ...upstreams.flatMap((u) => ["--upstream", u])], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  return new Promise<PlainProxy>((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`the plain proxy did not listen within ${READY_TIMEOUT_MS} ms`));
    }, READY_TIMEOUT_MS);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the plain proxy exited (${code}) before it listened`));
    });
    let text = "";
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => {
      text += chunk;
      const url = /listening on (http:\/\/\S+)/.exec(text)?.[1];
      if (url) {
        clearTimeout(timer);
        resolve({ url, pid: child.pid!, stop });
      }
    });
  });
}
