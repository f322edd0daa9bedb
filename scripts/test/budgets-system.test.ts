/**
 * A budget across regions on the deployed topology (docs/USAGE.md): each region's worker in a
 * workerd process of its own, with its own Durable Object namespace, as each region worker's
 * script has on Cloudflare. The budget ledger is one object in the first region's namespace; the
 * other region reaches it over its BUDGET_LEDGER service binding (scripts/deploy/generate.ts). A
 * tenant that spends its budget in us-east is refused in eu-west too, and the usage ledger holds
 * exactly what the answers carried, also after us-east's worker is killed and started again on its
 * store. (The workerd tests run every region in one namespace, where a missing binding would not
 * show.) ~25 s.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parse } from "smol-toml";
import { DEV_API_KEY_2 } from "../../src/config/dev-credentials.ts";
import type { UsageRow } from "../../src/contracts/usage.ts";
import { ROOT, startSystem } from "../system.ts";

const BUDGET = 1_000;
/** The longest a run takes (~25 s measured): one must start at least this long before UTC midnight. */
const RUN_MS = 180_000;
const DAY_MS = 86_400_000;
const utcDay = (at: number) => new Date(at).toISOString().slice(0, 10);

test(
  "a budget spent in one region's process is refused in another's; the ledger survives a region worker's restart",
  // The run, after waiting for midnight at most as long.
  { timeout: 2 * RUN_MS },
  async () => {
    // The budget is per UTC day: a run that crossed midnight would see the spend reset midway.
    // Started too close to it, the test waits for the new day (at most 3 minutes).
    const toMidnight = DAY_MS - (Date.now() % DAY_MS);
    if (toMidnight < RUN_MS) await sleep(toMidnight + 1_000);
    const firstDay = utcDay(Date.now());
    const toml = parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as { vars: { WARMPATH_CONFIG: Record<string, unknown> } };
    const config = structuredClone(toml.vars.WARMPATH_CONFIG) as { tenants: Array<Record<string, unknown>>; usage?: unknown };
    config.tenants.find((t) => t.id === "dev-2")!.budget = { tokens_per_day: BUDGET };
    config.usage = { flush_interval_ms: 250 };
    const system = await startSystem({ port: 0, runtime: "workerd", timeFactorScale: 20, config });
    try {
      let carried = 0;
      const ask = async (region: string) => {
        const res = await fetch(`${system.url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${DEV_API_KEY_2}`, "content-type": "application/json", "x-warmpath-region": region },
          body: JSON.stringify({
            model: "llama-3.1-8b-instruct",
            max_tokens: 5,
            messages: [{ role: "user", content: `budget ${Math.random()} ` + "spend it. ".repeat(40) }],
          }),
        });
        const body = (await res.json()) as { usage?: { prompt_tokens: number; completion_tokens: number }; error?: { code: string } };
        if (res.status === 200) carried += body.usage!.prompt_tokens + body.usage!.completion_tokens;
        return { status: res.status, code: body.error?.code };
      };
      const ledger = async () => {
        const rows = (
          (await (await fetch(`${system.url}/admin/usage?tenant=dev-2&from=${firstDay}&to=${utcDay(Date.now())}`)).json()) as {
            data: UsageRow[];
          }
        ).data;
        return rows.reduce(
          (n, r) => n + r.prompt_tokens + r.completion_tokens + r.estimated_prompt_tokens + r.estimated_completion_tokens,
          0,
        );
      };

      let refused: { status: number; code: string | undefined } | undefined;
      for (let i = 0; i < 40 && !refused; i++) {
        const r = await ask("us-east");
        if (r.status !== 200) refused = r;
      }
      assert.deepEqual(refused, { status: 429, code: "insufficient_quota" }, "us-east refused once the budget was spent");
      // eu-west's object hears the budget ledger's totals within a flush interval and a round trip.
      let euRefused = false;
      for (let i = 0; i < 40 && !euRefused; i++) {
        const r = await ask("eu-west");
        if (r.status === 429) {
          assert.equal(r.code, "insufficient_quota");
          euRefused = true;
        } else await sleep(100);
      }
      assert.ok(euRefused, "eu-west never refused the tenant that spent its budget in us-east");

      // The ledger is exactly what the answers carried, before and after us-east's worker is killed.
      const exact = async (when: string) => {
        for (let i = 0; i < 40; i++) {
          if ((await ledger()) === carried) return;
          await sleep(250);
        }
        assert.equal(await ledger(), carried, `ledger against the answers ${when}`);
      };
      await exact("before the restart");
      await system.killRegionWorker("us-east");
      await system.startRegionWorker("us-east");
      await exact("after us-east's worker was killed and started again on its store");
      // And the spent budget is still refused there.
      assert.equal((await ask("us-east")).status, 429);
    } finally {
      await system.stop();
    }
  },
);
