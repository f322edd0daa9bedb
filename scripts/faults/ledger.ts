/**
 * The usage ledger (docs/USAGE.md) around a scenario: `GET /admin/usage` before and after, against
 * what the scenario's answers carried.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { DEV_API_KEY, DEV_API_KEY_2 } from "../../src/config/dev-credentials.ts";
import type { UsageRow } from "../../src/contracts/usage.ts";
import type { System } from "../system.ts";
import type { Sent } from "./client.ts";

/** The scenarios' tenant whose requests ask for the usage event (`stream_options.include_usage`). */
export const USAGE_TENANT_KEY = DEV_API_KEY_2;

/** The development tenants' ids (wrangler.toml), by key. */
export const TENANT_OF_KEY = new Map([
  [DEV_API_KEY, "dev"],
  [DEV_API_KEY_2, "dev-2"],
]);

/** A tenant's usage ledger (GET /admin/usage, yesterday and today): answered requests, those estimated, and reported tokens. */
interface LedgerTotals {
  requests: number;
  estimated: number;
  prompt: number;
  completion: number;
}

async function ledgerOf(system: System, tenant: string): Promise<LedgerTotals> {
  const day = (at: number) => new Date(at).toISOString().slice(0, 10);
  const url = `${system.url}/admin/usage?tenant=${tenant}&from=${day(Date.now() - 86_400_000)}&to=${day(Date.now())}`;
  const rows = ((await (await fetch(url)).json()) as { data: UsageRow[] }).data;
  const total = (k: keyof UsageRow) => rows.reduce((n, r) => n + (r[k] as number), 0);
  return {
    requests: total("requests"),
    estimated: total("estimated_requests"),
    prompt: total("prompt_tokens"),
    completion: total("completion_tokens"),
  };
}

/** Both tenants' ledgers. */
export async function ledgers(system: System): Promise<Map<string, LedgerTotals>> {
  return new Map(await Promise.all([...TENANT_OF_KEY.values()].map(async (t) => [t, await ledgerOf(system, t)] as const)));
}

/**
 * The usage ledger against what the clients read, over a scenario: every request a node answered
 * (status 200) billed once, and for the tenant that asks for the usage event, the ledger's reported
 * tokens exactly its answers' usage events (docs/USAGE.md). Bills reach the region objects just after
 * the streams end: read until they match or stop changing.
 */
export async function ledgerCheck(system: System, before: Map<string, LedgerTotals>, results: readonly Sent[]): Promise<LedgerCheck> {
  const answered = (tenant: string) => results.filter((r) => r.tenant === tenant && r.status === 200).length;
  const usageTenant = TENANT_OF_KEY.get(USAGE_TENANT_KEY)!;
  const carried = results.filter((r) => r.tenant === usageTenant && r.usage);
  const want = {
    answered: [...TENANT_OF_KEY.values()].reduce((n, t) => n + answered(t), 0),
    prompt: carried.reduce((n, r) => n + r.usage!.prompt, 0),
    completion: carried.reduce((n, r) => n + r.usage!.completion, 0),
  };
  let check: LedgerCheck | undefined;
  for (let i = 0; i < 20; i++) {
    const now = await ledgers(system);
    const delta = (t: string, k: keyof LedgerTotals) => now.get(t)![k] - before.get(t)![k];
    const next: LedgerCheck = {
      answered: want.answered,
      billed: [...TENANT_OF_KEY.values()].reduce((n, t) => n + delta(t, "requests"), 0),
      estimated: [...TENANT_OF_KEY.values()].reduce((n, t) => n + delta(t, "estimated"), 0),
      carriedTokens: want.prompt + want.completion,
      // The usage tenant's estimated answers carried no usage event: only its reported tokens are compared.
      billedTokens: delta(usageTenant, "prompt") + delta(usageTenant, "completion"),
    };
    if (next.billed === next.answered && next.billedTokens === next.carriedTokens) return next;
    if (check && JSON.stringify(check) === JSON.stringify(next)) return next;
    check = next;
    await sleep(250);
  }
  return check!;
}

/** A scenario's usage ledger against its answers (ledgerCheck). */
export interface LedgerCheck {
  /** Requests a node answered (status 200), both tenants; billed in the ledger, and of those estimated (no usage reported). */
  answered: number;
  billed: number;
  estimated: number;
  /** The usage tenant: the tokens its answers' usage events carried, and the ledger's reported tokens. */
  carriedTokens: number;
  billedTokens: number;
}

/** The ledger column: `exact` when every answered request was billed once and the tokens match, else what differs. */
export function formatLedger(l: LedgerCheck): string {
  const requests = l.billed === l.answered ? `${l.answered} billed` : `${l.billed} billed of ${l.answered} answered`;
  const estimated = l.estimated ? ` (${l.estimated} estimated)` : "";
  const tokens = l.billedTokens === l.carriedTokens ? "tokens exact" : `tokens ${l.billedTokens} billed, ${l.carriedTokens} carried`;
  return l.billed === l.answered && l.billedTokens === l.carriedTokens
    ? `exact: ${requests}${estimated}`
    : `${requests}${estimated}; ${tokens}`;
}
