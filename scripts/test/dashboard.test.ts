/**
 * The dashboard in a real headless browser (Debian's chromium, driven by playwright-core) against
 * the running system: the router under wrangler dev and the simulated fleet. Checks that the page
 * shows the regions, nodes, decisions and hit rates after real traffic, and that its screenshot is
 * not blank.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { DEV_API_KEY } from "../../src/config/dev-credentials.ts";
import { devConfigWithPolicy } from "../demo/policy-config.ts";
import { ROOT, startSystem, type System } from "../system.ts";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
/** Flags for a root, offline, headless chromium (no sandbox as root; no background network). */
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  // A host name that is not loopback, as a deployed router's would be: the admin API then wants its token.
  `--host-resolver-rules=MAP ${"router.test"} 127.0.0.1`,
];

/** The admin token of this test's router (not a development credential: those only work on loopback). */
const ADMIN_TOKEN = "dashboard-test-admin-token-4f1c";

let system: System;
let browser: Browser;

before(async () => {
  assert.ok(existsSync(CHROMIUM), `chromium not found at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`);
  system = await startSystem({
    port: 0,
    timeFactorScale: 20,
    config: { ...devConfigWithPolicy("warmpath"), admin_token_secret: "DASHBOARD_ADMIN_TOKEN" },
    secrets: { DASHBOARD_ADMIN_TOKEN: ADMIN_TOKEN },
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
});

after(async () => {
  await browser?.close();
  await system?.stop();
});

async function send(i: number, system: System): Promise<void> {
  const res = await fetch(`${system.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEV_API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "llama-3.1-8b-instruct",
      max_tokens: 8,
      messages: [
        { role: "system", content: `Support agent for product ${i % 3}. ` + "Follow the policy. ".repeat(400) },
        { role: "user", content: `question ${i}` },
      ],
    }),
  });
  assert.equal(res.status, 200);
  await res.arrayBuffer();
}

test("the dashboard opens on the router's history: charts, decisions and hit rates from traffic sent before it", async () => {
  // Traffic first: the page must show it from the router's own history, not from what it saw.
  for (let i = 0; i < 16; i++) await send(i, system);
  const page = await browser.newPage({ viewport: { width: 1400, height: 1400 } });
  await page.goto(`${system.url}/dashboard/`);
  await page.waitForSelector("#app:not([hidden])", { timeout: 15_000 });
  await page.waitForFunction(
    () => {
      const cards = [...document.querySelectorAll(".card")].map((c) => c.textContent ?? "");
      const routed = cards.find((c) => c.startsWith("Requests routed"));
      return (
        routed !== undefined &&
        /1[6-9]|[2-9]\d/.test(routed) &&
        document.querySelectorAll("#chart-hit circle").length >= 2 &&
        document.querySelectorAll("#decisions tbody tr .candidates span").length > 0
      );
    },
    undefined,
    { timeout: 15_000 },
  );
  const text = await page.textContent("main");
  assert.ok(text?.includes("us-east") && text.includes("eu-west"), "both regions are shown");
  for (const node of ["use1-a", "use1-b", "use1-c", "euw1-a"]) assert.ok(text?.includes(node), `node ${node} is shown`);
  assert.ok((await page.$$(".mix span")).length > 0, "decision mix bars are drawn");
  // Per-node token throughput, from the nodes' usage in the router's history, in the table and the charts.
  assert.ok(
    (await page.$$eval("td[title^='prefill tokens computed']", (tds) => tds.map((td) => td.textContent ?? ""))).some((t) =>
      /\d.* \/ \d/.test(t),
    ),
    "per-node token throughput is shown",
  );
  for (const chart of ["rps", "prefill", "decode"]) {
    assert.ok((await page.$$(`#chart-${chart} circle`)).length > 0, `the ${chart} chart has a series`);
  }
  // The recent decisions: the 16 requests, newest first, each with its node, decision and candidates.
  const rows = await page.$$eval("#decisions tbody tr", (trs) =>
    trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent ?? "")),
  );
  assert.ok(rows.length >= 16, `${rows.length} decisions shown`);
  for (const row of rows.slice(0, 16)) {
    assert.match(row[5] ?? "", /prefix-hit|cold-spread|hot-spill|session/, "each row names its decision");
    assert.equal(row[8], "ok");
  }
  const measured = await page.textContent(".card:nth-child(2) .value");
  assert.match(measured ?? "", /^\d+(\.\d)?% of \d+ answers$/, "a measured hit rate is shown with its sample count");
  assert.ok(!measured?.startsWith("0.0%"), "repeated system prompts were measured as cache hits");

  const png = await page.screenshot({ fullPage: true });
  mkdirSync(join(ROOT, ".tmp"), { recursive: true });
  writeFileSync(join(ROOT, ".tmp", "dashboard.png"), png);
  // Not blank: decode the screenshot in the browser and count distinct colours.
  const check = await browser.newPage();
  const colours = await check.evaluate(
    async (dataUrl) => {
      const img = new Image();
      img.src = dataUrl;
      await img.decode();
      const canvas = document.createElement("canvas");
      canvas.width = img.width;
      canvas.height = img.height;
      const ctx = canvas.getContext("2d")!;
      ctx.drawImage(img, 0, 0);
      const data = ctx.getImageData(0, 0, img.width, img.height).data;
      const seen = new Set<number>();
      for (let i = 0; i < data.length; i += 4 * 7) seen.add((data[i]! << 16) | (data[i + 1]! << 8) | data[i + 2]!);
      return seen.size;
    },
    `data:image/png;base64,${png.toString("base64")}`,
  );
  assert.ok(colours > 20, `screenshot has ${colours} distinct colours: not blank`);
});

test("on a non-loopback host the dashboard asks for the admin token, refuses a wrong one and works with the right one", async () => {
  const page = await browser.newPage();
  await page.goto(`${system.url.replace("127.0.0.1", "router.test")}/dashboard/`);
  await page.waitForSelector("#login:not([hidden])", { timeout: 15_000 });
  assert.equal(await page.textContent("#status"), "admin token needed");
  await page.fill("#token", "not-the-token");
  await page.click("#login button");
  await new Promise((r) => setTimeout(r, 1_000));
  assert.equal(await page.isHidden("#app"), true, "a wrong token shows nothing");
  await page.fill("#token", ADMIN_TOKEN);
  await page.click("#login button");
  await page.waitForSelector("#app:not([hidden])", { timeout: 15_000 });
  await page.waitForFunction(() => document.querySelectorAll("#decisions tbody tr .candidates span").length > 0, undefined, {
    timeout: 15_000,
  });
  assert.ok((await page.textContent("main"))?.includes("use1-a"));
});
