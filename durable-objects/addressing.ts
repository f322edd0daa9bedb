/**
 * How a region object addresses the other objects it calls, in its worker's namespace (the REGION
 * binding): its region's load exchange, and the budget ledger, here or through the ledger's home
 * region's worker. The names are shared with the region worker, which addresses the region's own
 * objects with their location hints (regionStub, regionIngestStub: src/config/load.ts): a shard's
 * and the exchange's in src/core/shard.ts, the ledger's in src/contracts/usage.ts.
 */
import { BUDGET_LEDGER_BINDING } from "../src/contracts/topology.ts";
import { signingFetcher } from "../src/http/internal-auth.ts";
import { SPEND_LEDGER_NAME } from "../src/contracts/usage.ts";
import { loadExchangeName } from "../src/core/shard.ts";

/** A sharded region's load exchange (the object named by loadExchangeName), as its shards call it. */
export function loadExchangeStub(env: Env, region: string) {
  return env.REGION.getByName(loadExchangeName(region));
}

/** The budget ledger (the object named SPEND_LEDGER_NAME) in this worker's namespace. */
export function spendLedgerStub(env: Env) {
  return env.REGION.getByName(SPEND_LEDGER_NAME);
}

/**
 * The binding to the budget ledger's home region's worker (BUDGET_LEDGER_BINDING), or undefined
 * if this worker is the ledger's home (or the local single-process composition, which has one
 * namespace): the ledger is then {@link spendLedgerStub}. Every request through it is signed as a
 * region worker's (src/http/internal-auth.ts): the ledger's home takes spend batches from no one else.
 */
export function budgetLedgerHome(env: Env): Fetcher | undefined {
  const binding = (env as unknown as Record<string, unknown>)[BUDGET_LEDGER_BINDING] as Fetcher | undefined;
  return binding && signingFetcher(env, "region", binding);
}
