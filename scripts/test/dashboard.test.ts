/**
 * The dashboard in a real headless browser (Debian's chromium, driven by playwright-core) against
 * the running system: the router under wrangler dev and the simulated fleet. Checks that the page
 * shows the regions, nodes, decisions and hit rates after real traffic, streamed and not; that its
 * time axis spans the minute of a fresh router (not the hour kept), its labels are 12px or more
 * with units, each node has a colour of its own, streamed first tokens are shown apart from whole
 * answers (and a region that does not say which still shows its first byte); and that its
 * screenshot is not blank, charts included.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { DEV_API_KEY } from "../../src/config/dev-credentials.ts";
import { devConfigWithPolicy } from "../demo/policy-config.ts";
import { ROOT, startSystem, type System } from "../system.ts";
import { loadFleet } from "../../fleet/config.ts";

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
  // use1-a says its places in its reports (as warmpath-agent --max-running does); the others do not.
  const fleetConfig = loadFleet(join(ROOT, "fleet", "fleet.default.json"));
  for (const n of fleetConfig.regions.flatMap((r) => r.nodes)) if (n.id === "use1-a") n.report_max_running = true;
  system = await startSystem({
    port: 0,
    fleetConfig,
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

/** The dashboard's node colours (public/dashboard/dashboard.js NODE_COLOURS: Okabe-Ito, black made light grey). */
const NODE_COLOURS = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#DDDDDD"];

/** Sends one chat completion, streamed or not, and reads the whole answer; resolves with its request id. */
async function send(i: number, system: System, stream = false): Promise<string> {
  const res = await fetch(`${system.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEV_API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "llama-3.1-8b-instruct",
      max_tokens: 8,
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
      messages: [
        { role: "system", content: `Support agent for product ${i % 3}. ` + "Follow the policy. ".repeat(400) },
        { role: "user", content: `question ${i}` },
      ],
    }),
  });
  assert.equal(res.status, 200);
  const body = await res.text();
  if (stream) assert.ok(body.includes("data: [DONE]"), "a whole stream");
  const id = res.headers.get("x-request-id");
  assert.ok(id, "the router names the request");
  return id;
}

/** Resolves once the wall clock has passed the next 10 s history bucket's start (the router's clock is this machine's). */
async function nextBucket(): Promise<void> {
  await new Promise((r) => setTimeout(r, 10_000 - (Date.now() % 10_000) + 250));
}

/**
 * Decodes a PNG in a browser page and describes its pixels: distinct colours, pixels that differ
 * from the most common one (the background), and pixels near each of `colours` (±40 per channel).
 */
async function pixels(browser: Browser, png: Buffer, colours: string[]) {
  const check = await browser.newPage();
  try {
    return await check.evaluate(
      async ({ dataUrl, colours }) => {
        const img = new Image();
        img.src = dataUrl;
        await img.decode();
        const canvas = document.createElement("canvas");
        canvas.width = img.width;
        canvas.height = img.height;
        const ctx = canvas.getContext("2d")!;
        ctx.drawImage(img, 0, 0);
        const data = ctx.getImageData(0, 0, img.width, img.height).data;
        const rgb = colours.map((c) => [1, 3, 5].map((k) => parseInt(c.slice(k, k + 2), 16)) as [number, number, number]);
        const counts = new Map<number, number>();
        const near = rgb.map(() => 0);
        for (let i = 0; i < data.length; i += 4) {
          const [r, g, b] = [data[i]!, data[i + 1]!, data[i + 2]!];
          const key = (r << 16) | (g << 8) | b;
          counts.set(key, (counts.get(key) ?? 0) + 1);
          rgb.forEach(([cr, cg, cb], k) => {
            if (Math.abs(r - cr) <= 40 && Math.abs(g - cg) <= 40 && Math.abs(b - cb) <= 40) near[k]!++;
          });
        }
        const background = Math.max(...counts.values());
        return { total: data.length / 4, distinct: counts.size, foreground: data.length / 4 - background, near };
      },
      { dataUrl: `data:image/png;base64,${png.toString("base64")}`, colours },
    );
  } finally {
    await check.close();
  }
}

test("the dashboard opens on the router's history: charts, decisions and hit rates from traffic sent before it", async () => {
  // Traffic first: the page must show it from the router's own history, not from what it saw.
  // Whole (non-streamed) answers, then, in the next 10 s bucket (so the charts have a line, not a
  // point), streamed ones.
  const whole: string[] = [];
  const streamed: string[] = [];
  for (let i = 0; i < 12; i++) whole.push(await send(i, system));
  await nextBucket();
  for (let i = 12; i < 18; i++) streamed.push(await send(i, system, true));
  const page = await browser.newPage({ viewport: { width: 1400, height: 1400 } });
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`${system.url}/dashboard/`);
  await page.waitForSelector("#app:not([hidden])", { timeout: 15_000 });
  await page
    .waitForFunction(
      () => {
        const cards = [...document.querySelectorAll(".card")].map((c) => c.textContent ?? "");
        const routed = cards.find((c) => c.startsWith("Requests routed"));
        return (
          routed !== undefined &&
          /1[8-9]|[2-9]\d/.test(routed) &&
          document.querySelectorAll("#chart-hit circle").length >= 2 &&
          document.querySelectorAll("#decisions tbody tr .candidates span").length > 0
        );
      },
      undefined,
      { timeout: 15_000 },
    )
    .catch(async (e: Error) => {
      const shown = await page.evaluate(() => ({
        cards: [...document.querySelectorAll(".card")].map((c) => c.textContent),
        status: document.getElementById("status")?.textContent,
        hitDots: document.querySelectorAll("#chart-hit circle").length,
        candidates: document.querySelectorAll("#decisions tbody tr .candidates span").length,
      }));
      throw new Error(`${e.message}: the page shows ${JSON.stringify(shown)}; page errors: ${JSON.stringify(errors)}`);
    });
  const text = await page.textContent("main");
  assert.ok(text?.includes("us-east") && text.includes("eu-west"), "both regions are shown");
  for (const node of ["use1-a", "use1-b", "use1-c", "euw1-a"]) assert.ok(text?.includes(node), `node ${node} is shown`);
  assert.ok((await page.$$(".mix span")).length > 0, "decision mix bars are drawn");
  // In flight over the places of a node that said them (use1-a reports max_running 64), alone for one that did not.
  const inflight = await page.$$eval(".region tbody tr", (trs) =>
    trs.map((tr) => [tr.querySelector("td b")?.textContent ?? "", (tr.querySelectorAll("td")[4]?.textContent ?? "").trim()]),
  );
  const cell = (node: string) => inflight.find(([id]) => id === node)?.[1];
  assert.match(cell("use1-a") ?? "", /^\d+ \/ 64$/, `use1-a's in flight / places: ${JSON.stringify(inflight)}`);
  assert.match(cell("use1-b") ?? "", /^\d+$/, "use1-b said no places");
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
  // The recent decisions: the 18 requests, newest first, each with its node, decision and candidates.
  const rows = await page.$$eval("#decisions tbody tr", (trs) =>
    trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => (td.textContent ?? "").trim())),
  );
  assert.ok(rows.length >= 18, `${rows.length} decisions shown`);
  for (const row of rows.slice(0, 18)) {
    assert.match(row[5] ?? "", /prefix-hit|cold-spread|hot-spill|session/, "each row names its decision");
    assert.equal(row[8], "ok");
  }
  // This month's usage: the development tenant's 18 requests, from the usage ledger.
  await page.waitForFunction(() => (document.querySelector("#usage tbody tr td")?.textContent ?? "") === "dev", undefined, {
    timeout: 15_000,
  });
  const usage = await page.$$eval("#usage tbody tr", (trs) =>
    trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => (td.textContent ?? "").trim())),
  );
  assert.equal(usage[0]?.[0], "dev");
  assert.ok(Number(usage[0]?.[1]) >= 18, `requests shown: ${usage[0]?.[1]}`);
  assert.match(usage[0]?.[6] ?? "", /^\$\d+\.\d{4}$/, "a cost in USD");
  // A streamed answer's first token and a whole answer apart: each in its own column, by request id.
  const headers = await page.$$eval("#decisions thead th", (ths) =>
    ths.map((th) => (th as HTMLElement).innerText.replace(/\s+/g, " ").trim()),
  );
  assert.equal(headers[9], "first token streamed");
  assert.equal(headers[10], "whole answer not streamed");
  const byId = new Map(
    await page.$$eval("#decisions tbody tr", (trs) =>
      trs.map((tr) => {
        const tds = [...tr.querySelectorAll("td")];
        return [tds[1]?.getAttribute("title") ?? "", tds.map((td) => (td.textContent ?? "").trim())] as const;
      }),
    ),
  );
  for (const id of streamed) {
    const row = byId.get(id);
    assert.ok(row, `streamed request ${id} is shown`);
    assert.match(row[9] ?? "", /^\d+ ms$/, `streamed ${id}: its time to first token`);
    assert.equal(row[10], "–", `streamed ${id}: not a whole answer`);
  }
  const shownWhole = whole.filter((id) => byId.has(id));
  assert.ok(shownWhole.length >= 5, `${shownWhole.length} whole answers shown`);
  for (const id of shownWhole) {
    const row = byId.get(id)!;
    assert.equal(row[9], "–", `whole ${id}: no first token of a stream`);
    assert.match(row[10] ?? "", /^\d+ ms$/, `whole ${id}: the whole answer's time`);
  }

  // The time axis fits the data: a fresh router's minute or so, not the hour it keeps; ticks with units.
  for (const chart of ["hit", "rps", "prefill", "decode"]) {
    const axis = await page.$eval(`#chart-${chart}`, (svg) => ({
      span: Number((svg as SVGElement).dataset.spanMs),
      x: [...svg.querySelectorAll("text.x-tick")].map((t) => t.textContent ?? ""),
      y: [...svg.querySelectorAll("text.y-tick")].map((t) => t.textContent ?? ""),
      lines: [...svg.querySelectorAll("path")].filter((p) => (p.getAttribute("d") ?? "").includes("L")).length,
    }));
    assert.ok(axis.span >= 60_000 && axis.span <= 5 * 60_000, `${chart}: the time axis spans ${axis.span} ms`);
    assert.equal(axis.x[0], "now", `${chart}: the axis ends now`);
    assert.ok(axis.x.length >= 3, `${chart}: ${axis.x.length} time ticks`);
    for (const tick of axis.x.slice(1)) assert.match(tick, /^−\d+ (s|min)$/, `${chart}: time tick "${tick}" has a unit`);
    assert.ok(!axis.x.some((t) => /−(30|60) min/.test(t)), `${chart}: not the hour (${axis.x.join(", ")})`);
    const unit = chart === "hit" ? /^\d+%$/ : chart === "rps" ? /^[\d.]+k? req\/s$/ : /^[\d.]+[kM]? tok\/s$/;
    assert.ok(axis.y.length >= 3, `${chart}: ${axis.y.length} value ticks`);
    for (const tick of axis.y) assert.match(tick, unit, `${chart}: value tick "${tick}" has a unit`);
    assert.ok(axis.lines > 0, `${chart}: a series is drawn as a line across two buckets`);
  }

  // Legible: every piece of text on the page is drawn at 12px or more (SVG text at its on-screen scale).
  const small = await page.evaluate(() => {
    const out: string[] = [];
    for (const el of document.querySelectorAll<HTMLElement | SVGGraphicsElement>("main *")) {
      const own = [...el.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && (n.textContent ?? "").trim() !== "");
      if (!own || !(el.getClientRects().length > 0)) continue;
      const size = parseFloat(getComputedStyle(el).fontSize) * (el instanceof SVGGraphicsElement ? (el.getScreenCTM()?.a ?? 1) : 1);
      if (size < 12 - 0.01) out.push(`${el.tagName} "${(el.textContent ?? "").trim().slice(0, 30)}" ${size.toFixed(1)}px`);
    }
    return out;
  });
  assert.deepEqual(small, [], "no text under 12px");

  // Node colours: the Okabe-Ito palette, one per node, the same node alike in every chart and after a redraw.
  const styles = async () =>
    Object.fromEntries(
      await Promise.all(
        ["rps", "prefill", "decode"].map(
          async (chart) =>
            [
              chart,
              await page.$$eval(`#chart-${chart} path`, (paths) =>
                paths.map((p) => [
                  p.querySelector("title")?.textContent ?? "",
                  `${p.getAttribute("stroke")} ${p.getAttribute("stroke-dasharray") ?? ""}`,
                ]),
              ),
            ] as const,
        ),
      ),
    ) as Record<string, Array<[string, string]>>;
  const looks = await styles();
  const rps = new Map(looks.rps);
  assert.ok(rps.size >= 3, `${rps.size} nodes charted`);
  assert.equal(new Set(rps.values()).size, rps.size, `each node its own colour: ${[...rps].join("; ")}`);
  for (const style of rps.values()) assert.ok(NODE_COLOURS.includes(style.split(" ")[0]!), `${style} is from the palette`);
  for (const chart of ["prefill", "decode"]) {
    for (const [node, style] of looks[chart]!) assert.equal(style, rps.get(node), `${node} looks the same in the ${chart} chart`);
  }
  await page.setViewportSize({ width: 1200, height: 1400 });
  await page.waitForTimeout(300);
  assert.deepEqual(await styles(), looks, "a redraw keeps every node's colour");
  await page.setViewportSize({ width: 1400, height: 1400 });
  await page.waitForTimeout(300);
  const measured = await page.textContent(".card:nth-child(2) .value");
  assert.match(measured ?? "", /^\d+(\.\d)?% of \d+ answers$/, "a measured hit rate is shown with its sample count");
  assert.ok(!measured?.startsWith("0.0%"), "repeated system prompts were measured as cache hits");

  assert.deepEqual(errors, [], "the page ran without errors");
  const png = await page.screenshot({ fullPage: true });
  mkdirSync(join(ROOT, ".tmp"), { recursive: true });
  writeFileSync(join(ROOT, ".tmp", "dashboard.png"), png);
  // Not blank: decode the screenshot in the browser and count distinct colours.
  const full = await pixels(browser, png, []);
  assert.ok(full.distinct > 20, `screenshot has ${full.distinct} distinct colours: not blank`);
  // Nor are the charts: each one's screenshot has lines in the series' colours, not only its grid.
  for (const chart of ["hit", "rps", "prefill", "decode"]) {
    const shot = await page.locator(`#chart-${chart}`).screenshot();
    writeFileSync(join(ROOT, ".tmp", `dashboard-${chart}.png`), shot);
    const colours = chart === "hit" ? ["#E69F00", "#56B4E9"] : [...new Set(looks[chart]!.map(([, style]) => style.split(" ")[0]!))];
    const p = await pixels(browser, shot, colours);
    assert.ok(p.distinct >= 10, `${chart} chart: ${p.distinct} distinct colours`);
    assert.ok(p.foreground / p.total > 0.02, `${chart} chart: ${p.foreground} of ${p.total} pixels drawn`);
    const drawn = p.near.reduce((a, b) => a + b, 0);
    assert.ok(drawn >= 150, `${chart} chart: ${drawn} pixels in its series' colours (${p.near.join(", ")})`);
  }
});

test("a region that does not say how its first byte came still shows it, in one cell across both columns", async () => {
  // An older region's decision records have no firstByteKind: the page is handed such a history.
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  await page.route("**/admin/history", async (route) => {
    const response = await route.fetch();
    const history = (await response.json()) as { regions: Array<{ decisions: Array<Record<string, unknown>> }> };
    for (const r of history.regions) for (const d of r.decisions) delete d.firstByteKind;
    await route.fulfill({ response, json: history });
  });
  await page.goto(`${system.url}/dashboard/`);
  await page.waitForFunction(() => document.querySelectorAll("#decisions td.first-byte-unknown").length > 0, undefined, {
    timeout: 15_000,
  });
  const cells = await page.$$eval("#decisions td.first-byte-unknown", (tds) =>
    tds.map((td) => ({ text: (td.textContent ?? "").trim(), span: (td as HTMLTableCellElement).colSpan })),
  );
  for (const c of cells) {
    assert.match(c.text, /^\d+ ms first byte$/);
    assert.equal(c.span, 2);
  }
  // Every row still has its twelve columns' width.
  const widths = await page.$$eval("#decisions tbody tr", (trs) =>
    trs.map((tr) => [...tr.querySelectorAll("td")].reduce((n, td) => n + td.colSpan, 0)),
  );
  assert.ok(
    widths.every((w) => w === 12),
    `row widths ${[...new Set(widths)].join(", ")}`,
  );
  // The page polls /admin/history every 5 s: a poll the handler is serving when the page closes
  // would reject inside Playwright, unhandled, after this test ended.
  await page.unrouteAll({ behavior: "ignoreErrors" });
  await page.close();
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
