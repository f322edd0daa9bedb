#!/usr/bin/env node
/**
 * warmpath-agent: the node agent. Runs beside an inference server (vLLM, SGLang, llama.cpp) and
 * pushes its load to a warmpath router's node API; `warmpath-agent --help` (agent/args.ts)
 * lists the flags and their defaults, agent/agent.ts explains the loop.
 *
 *   WARMPATH_NODE_TOKEN=... npx warmpath-agent --router https://warmpath.example.com \
 *     --region us-east --node-id gpu-1 --url http://10.0.0.5:8000
 *
 * From the repository this file runs as TypeScript, which needs Node 22.18+ (type stripping); the
 * package's own `node` (22) is first on PATH under `npx`/`npm exec`. On a GPU host, run the
 * bundle instead: `npm run build:agent` (scripts/build-agent.ts) makes dist/warmpath-agent.mjs,
 * one file with no dependencies for Node 18+ (docs/AGENT.md: installing it, systemd, containers).
 * Exit codes: 0 after SIGINT/SIGTERM (the node deregistered), 1 on a fatal error (no KV capacity),
 * 2 on a usage error.
 */
import { ENGINE_KEY_ENV, HELP, TOKEN_ENV, UsageError, parseAgentArgs } from "./args.ts";
import { startAgent } from "./agent.ts";
import { formatEvent } from "./log.ts";

function main(): void {
  let config;
  try {
    config = parseAgentArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    console.error(`warmpath-agent: ${e.message}`);
    process.exit(2);
  }
  if (!config) {
    console.log(HELP);
    return;
  }
  const token = process.env[TOKEN_ENV];
  if (!token) {
    console.error(`warmpath-agent: set ${TOKEN_ENV} to the region's node token`);
    process.exit(2);
  }
  const agent = startAgent({
    ...config,
    token,
    engineApiKey: process.env[ENGINE_KEY_ENV] || undefined,
    log: (e) => console.error(`${new Date().toISOString()} warmpath-agent ${config.region}/${config.nodeId}: ${formatEvent(e)}`),
  });
  const stop = () => {
    agent.stop().then(
      () => process.exit(0),
      () => process.exit(0), // stop() does not reject; exit 0 whatever the router said
    );
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  agent.done.catch(() => process.exit(1)); // the fatal error was logged
}

main();
