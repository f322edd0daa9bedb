/**
 * A local stand-in of the Cloudflare API, enough for real `wrangler deploy` (not --dry-run),
 * `wrangler secret put|bulk` and `wrangler deploy --secrets-file` to run against it: point wrangler
 * at it with CLOUDFLARE_API_BASE_URL (wrangler's getCloudflareApiBaseUrl), with any
 * CLOUDFLARE_API_TOKEN and the account id given here as CLOUDFLARE_ACCOUNT_ID ({@link wranglerEnv}).
 *
 * It keeps one account (./account.ts) and enforces the documented rules the deploy relies on
 * (./rules.ts). The endpoints are those wrangler 4.164 calls for these commands (read from
 * node_modules/wrangler/wrangler-dist/cli.js: preUploadApiChecks, deployWorker, triggersDeploy,
 * the secret commands); any other request is recorded in {@link Standin.unknown}, logged, and
 * answered 501, so a wrangler that starts calling something new fails loudly instead of passing.
 *
 * What it does not prove: docs/DEPLOY.md, "What the stand-in does not prove".
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Account } from "./account.ts";
import { ApiError, type UploadMetadata } from "./rules.ts";

export const API_PREFIX = "/client/v4";

export interface Standin {
  /** The base URL for CLOUDFLARE_API_BASE_URL. */
  url: string;
  account: Account;
  /** Requests no handler knew (`METHOD path`). */
  unknown: string[];
  /** Every request handled, in order (`METHOD path`), for a test to read the calls wrangler made. */
  calls: string[];
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, body: Buffer, params: string[], query: URLSearchParams) => Promise<unknown> | unknown;

const ok = (result: unknown) => ({ success: true, errors: [], messages: [], result });

async function readMultipart(req: IncomingMessage, body: Buffer): Promise<{ metadata: UploadMetadata; modules: Map<string, string> }> {
  const form = await new Request("http://standin/", {
    method: "POST",
    headers: { "content-type": String(req.headers["content-type"]) },
    body: new Uint8Array(body),
  }).formData();
  let metadata: UploadMetadata | undefined;
  const modules = new Map<string, string>();
  for (const [name, value] of form.entries()) {
    const text = typeof value === "string" ? value : await value.text();
    if (name === "metadata") metadata = JSON.parse(text) as UploadMetadata;
    else modules.set(name, text);
  }
  if (!metadata) throw new ApiError(400, 10021, "the upload has no metadata part");
  return { metadata, modules };
}

function routes(account: Account): Array<[string, RegExp, Handler]> {
  const acct = `/accounts/${account.id}`;
  const script = `${acct}/workers/scripts/([^/]+)`;
  const json = (body: Buffer) => JSON.parse(body.toString("utf8") || "null") as Record<string, unknown>;
  const latestDeployment = (name: string) => {
    const w = account.get(name);
    return w.deployed
      ? [{ id: `dep-${w.deployed}`, source: "wrangler", strategy: "percentage", versions: [{ version_id: w.deployed, percentage: 100 }] }]
      : [];
  };
  return [
    [
      "GET",
      new RegExp(`^${acct}/workers/services/([^/]+)$`),
      (_r, _b, [name]) => {
        const w = account.get(name!);
        return {
          id: name,
          default_environment: {
            environment: "production",
            script: { id: name, tag: w.tag, tags: [], migration_tag: w.migrationTag, last_deployed_from: "wrangler" },
          },
        };
      },
    ],
    [
      "GET",
      new RegExp(`^${script}/secrets$`),
      (_r, _b, [name]) => [...account.get(name!).secrets.keys()].map((n) => ({ name: n, type: "secret_text" })),
    ],
    [
      "PUT",
      new RegExp(`^${script}/secrets$`),
      (_r, body, [name]) => {
        const { name: secret, text } = json(body) as { name: string; text: string };
        account.putSecret(name!, secret, text);
        return { name: secret, type: "secret_text" };
      },
    ],
    [
      "PATCH",
      new RegExp(`^${script}/secrets-bulk$`),
      (_r, body, [name]) => {
        const { secrets } = json(body) as { secrets: Record<string, { text: string } | null> };
        for (const [k, v] of Object.entries(secrets)) v === null ? account.deleteSecret(name!, k) : account.putSecret(name!, k, v.text);
        return null;
      },
    ],
    ["DELETE", new RegExp(`^${script}/secrets/([^/]+)$`), (_r, _b, [name, secret]) => account.deleteSecret(name!, secret!)],
    ["GET", new RegExp(`^${script}/deployments$`), (_r, _b, [name]) => ({ deployments: latestDeployment(name!) })],
    [
      "POST",
      new RegExp(`^${script}/deployments$`),
      (_r, body, [name]) => {
        const w = account.get(name!);
        const { versions } = json(body) as { versions: Array<{ version_id: string; percentage: number }> };
        const full = versions.find((v) => v.percentage === 100);
        if (!full || !w.versions.some((v) => v.id === full.version_id))
          throw new ApiError(400, 10021, "a deployment here is one existing version at 100%");
        w.deployed = full.version_id;
        return { id: `dep-${full.version_id}`, versions };
      },
    ],
    [
      "PUT",
      new RegExp(`^${script}$`),
      async (req, body, [name]) => {
        const { metadata, modules } = await readMultipart(req, body);
        const draft = !account.workers.has(name!) && [...modules.values()].join("") === "export default { fetch() {} }";
        const v = account.upload(name!, metadata, modules, true);
        if (draft) account.markDraft(name!);
        return { id: name, etag: v.id, deployment_id: v.id, startup_time_ms: 1 };
      },
    ],
    [
      "POST",
      new RegExp(`^${script}/versions$`),
      async (req, body, [name]) => {
        const { metadata, modules } = await readMultipart(req, body);
        account.get(name!);
        const v = account.upload(name!, metadata, modules, false);
        return { id: v.id, number: v.number, resources: { script: { etag: v.id } }, startup_time_ms: 1 };
      },
    ],
    [
      "PATCH",
      new RegExp(`^${script}/script-settings$`),
      (_r, body, [name]) => {
        const w = account.get(name!);
        Object.assign(w.settings, json(body));
        return w.settings;
      },
    ],
    [
      "GET",
      new RegExp(`^${script}/settings$`),
      (_r, _b, [name]) => {
        const w = account.get(name!);
        const v = w.versions.find((x) => x.id === w.deployed);
        return {
          ...w.settings,
          bindings: v?.bindings ?? [],
          compatibility_date: v?.compatibility_date,
          placement: v?.placement,
          limits: v?.limits,
        };
      },
    ],
    [
      "GET",
      new RegExp(`^${acct}/workers/workers/([^/]+)$`),
      (_r, _b, [name]) => ({ id: account.get(name!).tag, name, subdomain: account.get(name!).workersDev }),
    ],
    ["GET", new RegExp(`^${acct}/workers/subdomain$`), () => ({ subdomain: "standin" })],
    ["GET", new RegExp(`^${script}/subdomain$`), (_r, _b, [name]) => account.get(name!).workersDev],
    [
      "POST",
      new RegExp(`^${script}/subdomain$`),
      (_r, body, [name]) => {
        const w = account.get(name!);
        const b = json(body) as { enabled: boolean; previews_enabled?: boolean };
        w.workersDev = { enabled: b.enabled, previews_enabled: b.previews_enabled ?? b.enabled };
        return w.workersDev;
      },
    ],
    [
      "POST",
      new RegExp(`^${script}/assets-upload-session$`),
      (_r, body, [name]) => {
        const { manifest } = json(body) as { manifest: Record<string, { hash: string }> };
        if (!manifest || typeof manifest !== "object") throw new ApiError(400, 10021, "assets-upload-session needs a manifest");
        // Every file already "uploaded": no buckets, the completion token at once.
        return { jwt: account.assetsToken(name!), buckets: [] };
      },
    ],
    [
      "POST",
      new RegExp(`^${script}/domains/changeset$`),
      (_r, body, [name]) => {
        const origins = json(body) as unknown as Array<{ hostname: string }>;
        const current = account.workers.get(name!)?.domains ?? [];
        return {
          added: origins.filter((o) => !current.some((d) => d.hostname === o.hostname)),
          removed: current.filter((d) => !origins.some((o) => o.hostname === d.hostname)),
          updated: [],
          conflicting: [],
        };
      },
    ],
    [
      "PUT",
      new RegExp(`^${script}/domains/records$`),
      (_r, body, [name]) => {
        const { origins } = json(body) as { origins: Array<{ hostname: string }> };
        account.setDomains(
          name!,
          origins.map((o) => o.hostname),
        );
        return null;
      },
    ],
  ];
}

/** Starts the stand-in on a free loopback port. */
export async function startStandin(options: { accountId?: string; zones?: string[]; log?: (line: string) => void } = {}): Promise<Standin> {
  const account = new Account(options.accountId ?? "0123456789abcdef0123456789abcdef", options.zones);
  const table = routes(account);
  const unknown: string[] = [];
  const calls: string[] = [];
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const server = createServer((req, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const url = new URL(req.url ?? "/", "http://standin");
        const path = url.pathname.startsWith(API_PREFIX) ? url.pathname.slice(API_PREFIX.length) : url.pathname;
        const what = `${req.method} ${path}`;
        calls.push(what);
        let status = 200;
        let payload: unknown;
        const match = table.map(([m, re, h]) => [m, re.exec(path), h] as const).find(([m, r]) => m === req.method && r);
        if (!match) {
          unknown.push(what);
          log(`standin: unknown request ${what}`);
          status = 501;
          payload = { success: false, errors: [{ code: 10000, message: `stand-in: no handler for ${what}` }], messages: [], result: null };
        } else {
          try {
            payload = ok(await match[2](req, Buffer.concat(chunks), match[1]!.slice(1).map(decodeURIComponent), url.searchParams));
          } catch (e) {
            if (!(e instanceof ApiError)) throw e;
            status = e.status;
            payload = { success: false, errors: [{ code: e.code, message: e.message }], messages: [], result: null };
          }
        }
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(payload));
      })().catch((e: unknown) => {
        log(`standin: ${String((e as Error).stack ?? e)}`);
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ success: false, errors: [{ code: 10000, message: String(e) }], messages: [], result: null }));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${API_PREFIX}`,
    account,
    unknown,
    calls,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The environment that points wrangler at a stand-in, with dummy credentials and no telemetry or prompts. */
export function wranglerEnv(standin: Standin): NodeJS.ProcessEnv {
  return {
    ...process.env,
    CLOUDFLARE_API_BASE_URL: standin.url,
    CLOUDFLARE_API_TOKEN: "standin-token",
    CLOUDFLARE_ACCOUNT_ID: standin.account.id,
    WRANGLER_SEND_METRICS: "false",
    WRANGLER_SEND_ERROR_REPORTS: "false",
    CI: "true",
    NO_COLOR: "1",
  };
}
