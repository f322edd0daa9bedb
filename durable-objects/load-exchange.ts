/**
 * A sharded region's load exchange (src/core/shard.ts): an object of its own, named by
 * loadExchangeName, through which the region's shards share what each has queued on each node,
 * and which ingests the region's node reports and hands them to the shards in its answers
 * ({@link LoadExchange}); and each shard's side of it ({@link ShardLink}). Both are roles of the
 * one region object class (durable-objects/region.ts), which holds one of each.
 */
import type { NodeReport } from "../src/contracts/node.ts";
import {
  exchangeRequestSchema,
  nodeFeedSchema,
  shardLoadsSchema,
  type ExchangeAnswer,
  type ExchangeRequest,
  type NodeFeed,
  type ShardLoads,
} from "../src/contracts/routing.ts";
import type { RegionRouter } from "../src/core/region/index.ts";
import { loadExchangeStub } from "./addressing.ts";
import { readConfig, writeConfig } from "./config-table.ts";

/**
 * How often a shard of a sharded region exchanges its load with the others (src/core/shard.ts).
 * The shard benchmark (bench/SHARDS.md) puts the split's cost in mean TTFT at 0.97-1.04x the
 * single object with this interval; without the exchange (reports only, every second) an earlier
 * run measured up to 1.4x, because each shard saw a fraction of the fleet's utilisation and
 * spilled too eagerly.
 * It is the shortest interval: with more shards, or more node reports into the exchange, the
 * interval grows ({@link exchangeIntervalMs}).
 */
const SHARD_LOAD_SYNC_MS = 20;
/** A shard's load older than this is left out of the others' sum (a shard that stopped routing has nothing queued there that is still ahead). */
const SHARD_LOAD_STALE_MS = 1_000;

/**
 * The requests a second a sharded region's exchange object takes, for the shards' exchanges and
 * the region's node reports together: 90% of the ~1,000 an object serves (docs/SCALING.md). The
 * reports come first (one a second per node, ingested once for every shard); the shards' exchanges
 * share what is left, never less than MIN_EXCHANGES_PER_SECOND.
 */
const EXCHANGE_OBJECT_BUDGET = 900;
/** Past this many node reports a second the exchange object is over its budget whatever the interval: a limit of one object per region's ingest (docs/SCALING.md). */
const MIN_EXCHANGES_PER_SECOND = 100;

/**
 * The interval between a shard's exchanges: 20 ms, or longer so that the region's shards and its
 * node reports stay within the exchange's budget (with 400 nodes reporting each second: 20 ms up
 * to 10 shards, 62 ms at 31).
 */
export function exchangeIntervalMs(shards: number, reportsPerSecond: number): number {
  const room = Math.max(MIN_EXCHANGES_PER_SECOND, EXCHANGE_OBJECT_BUDGET - reportsPerSecond);
  return Math.max(SHARD_LOAD_SYNC_MS, (shards * 1000) / room);
}

/** The window over which the exchange counts the node reports it ingests. */
const REPORT_RATE_WINDOW_MS = 10_000;

/** The most node reports (or removals) one exchange answer carries; a longer feed comes in parts. */
const MAX_FEED_REPORTS = 4096;

/**
 * The exchange of a sharded region: each shard's last load and when it came, and the region's
 * ingest (every node's latest accepted report, and removals, by feed version). Held in memory by
 * every region object; only the one named by loadExchangeName is ever asked.
 */
export class LoadExchange {
  /** Each shard's last load, and when it came. */
  private readonly shardLoads = new Map<number, { load: ShardLoads; at: number }>();
  /** Reports ingested in the current window, and in the last full one (-1: none yet). */
  private readonly reportWindow = { start: Date.now(), count: 0, last: -1 };
  /** The region's ingest: every node's latest accepted report, and removals, by feed version. */
  private readonly feedEpoch = crypto.randomUUID().slice(0, 8);
  private feedVersion = 0;
  private readonly feedReports = new Map<string, { version: number; report: NodeReport }>();
  private readonly feedRemoved = new Map<string, number>();

  /**
   * Keeps the asking shard's latest load and answers it with the sum of the others', and with the
   * node reports the region's ingest (the object's `report`, durable-objects/region.ts) accepted
   * since the shard last asked.
   */
  answer(request: ExchangeRequest): ExchangeAnswer {
    const parsed = exchangeRequestSchema.safeParse(request);
    // Only the worker's own shards call this; a malformed load is dropped (and logged), never summed.
    if (!parsed.success) {
      console.error(JSON.stringify({ event: "shard_load_refused", message: parsed.error.message.slice(0, 200) }));
      return {
        loads: {},
        feed: { epoch: this.feedEpoch, version: this.feedVersion, reports: [], removed: [] },
        reportsPerSecond: this.reportsPerSecond(Date.now()),
      };
    }
    const { shard, load, feed } = parsed.data;
    const now = Date.now();
    this.shardLoads.set(shard, { load, at: now });
    const others: ShardLoads = {};
    for (const [k, entry] of this.shardLoads) {
      if (k === shard) continue;
      if (now - entry.at > SHARD_LOAD_STALE_MS) {
        this.shardLoads.delete(k);
        continue;
      }
      for (const [node, l] of Object.entries(entry.load)) {
        // Own keys only: a node may be named `constructor`, which a plain object inherits.
        const sum = Object.hasOwn(others, node) ? others[node]! : (others[node] = { queued: 0, recent: 0 });
        sum.queued += l.queued;
        sum.recent += l.recent;
        if (l.inflight) sum.inflight = (sum.inflight ?? 0) + l.inflight;
      }
    }
    return {
      loads: others,
      feed: this.feedSince(feed?.epoch === this.feedEpoch ? feed.version : -1),
      reportsPerSecond: this.reportsPerSecond(now),
    };
  }

  /** The node reports a second this object ingested over its last full window (the current one's so far, before one). */
  private reportsPerSecond(now: number): number {
    this.countReport(now, 0);
    const w = this.reportWindow;
    return w.last >= 0 ? w.last / (REPORT_RATE_WINDOW_MS / 1000) : w.count / Math.max(1, (now - w.start) / 1000);
  }

  private countReport(now: number, n: number): void {
    const w = this.reportWindow;
    if (now - w.start >= REPORT_RATE_WINDOW_MS) {
      w.last = now - w.start < 2 * REPORT_RATE_WINDOW_MS ? w.count : 0;
      w.start = now;
      w.count = 0;
    }
    w.count += n;
  }

  /** The feed after `since` (-1: every node's latest report, for a shard new to this instance), at most MAX_FEED_REPORTS. */
  private feedSince(since: number): NodeFeed {
    const fresh = [...this.feedReports.values()].filter((e) => e.version > since).sort((a, b) => a.version - b.version);
    const reports = fresh.slice(0, MAX_FEED_REPORTS);
    // A longer feed is sent in parts: the shard asks again from the last report it got.
    const version = fresh.length > reports.length ? reports[reports.length - 1]!.version : this.feedVersion;
    const removed = since < 0 ? [] : [...this.feedRemoved].filter(([, v]) => v > since && v <= version).map(([id]) => id);
    return { epoch: this.feedEpoch, version, reports: reports.map((e) => e.report), removed: removed.slice(0, MAX_FEED_REPORTS) };
  }

  /** Whether the feed holds a report of this node (an expired node is then published as removed). */
  has(id: string): boolean {
    return this.feedReports.has(id);
  }

  /** Records an accepted report (or a removal) in the region's node feed, for the other shards. */
  publish(router: RegionRouter, id: string, report: NodeReport | undefined): void {
    if (router.settings.shards <= 1) return;
    if (report) this.countReport(Date.now(), 1);
    const version = ++this.feedVersion;
    if (report) {
      this.feedReports.set(id, { version, report });
      this.feedRemoved.delete(id);
    } else {
      this.feedReports.delete(id);
      this.feedRemoved.set(id, version);
      // Removals older than a node's silence timeout are of no use: a shard that missed them expires the node itself.
      for (const [k, v] of this.feedRemoved) if (this.feedRemoved.size > MAX_FEED_REPORTS && v < version) this.feedRemoved.delete(k);
    }
  }
}

/** What a shard's link needs of its region object. */
interface ShardHost {
  /** The router in force now: an exchange's answer for a router since replaced (a new configuration) is dropped. */
  router(): RegionRouter | undefined;
  /** Applies a report from the feed to the router (durable-objects/region.ts, `applyReport`). */
  applyReport(router: RegionRouter, report: NodeReport, now: number, seenIsDurable: boolean): Promise<unknown>;
  /** Drops a node's durable rows. */
  forget(id: string): void;
}

/**
 * A shard of a sharded region's side of the exchange: which shard it is (from its route calls),
 * where it is in the exchange's node feed, and when it last sent its load.
 */
export class ShardLink {
  private readonly ctx: DurableObjectState;
  private readonly env: Env;
  private readonly sql: SqlStorage;
  private readonly host: ShardHost;
  /** Which shard this object is (from its route calls); undefined for an object that is no shard of a sharded region. */
  private shardIndex: number | undefined;
  /** When it last sent its load to the region's exchange, and whether an exchange is under way. */
  private lastLoadSync = -Infinity;
  private loadSyncing = false;
  /** Where it is in the exchange's node feed. */
  private feedSeen: { epoch: string; version: number } | undefined;
  /** The region's node reports a second, as its exchange last said (what stretches the exchange interval). */
  private regionReportsPerSecond = 0;

  constructor(ctx: DurableObjectState, env: Env, sql: SqlStorage, host: ShardHost) {
    this.ctx = ctx;
    this.env = env;
    this.sql = sql;
    this.host = host;
  }

  /** Which shard this object is, if it has routed as one. */
  get index(): number | undefined {
    return this.shardIndex;
  }

  /** Reads the shard number kept in the `config` table (in the object's constructor, once the table exists). */
  restore(): void {
    const shard = readConfig(this.sql, "shard");
    if (shard !== undefined) this.shardIndex = Number(shard);
  }

  /** The object routed a request as shard `shard`: it keeps its number, and exchanges its load when due. */
  routed(router: RegionRouter, shard: number, now: number): void {
    if (this.shardIndex !== shard) {
      // Kept, so that a restarted shard hears the feed before its alarm expires anyone (alarm()).
      this.shardIndex = shard;
      writeConfig(this.sql, "shard", String(shard));
    }
    this.syncLoad(router, shard, now);
  }

  /**
   * Before the alarm expires anyone: a shard that has routed nothing lately has not heard the
   * feed, so it hears it first (a node silent here may have reported through the exchange). Only
   * then: the same alarm flushes usage every second, which needs no exchange.
   */
  async hearFeedBeforeExpiry(router: RegionRouter): Promise<void> {
    if (this.shardIndex !== undefined && !this.loadSyncing && router.hasSilentNodes(Date.now()))
      await this.exchangeWithRegion(router, this.shardIndex, Date.now());
  }

  /**
   * At most every {@link exchangeIntervalMs}, sends what this shard has dispatched to the region's
   * load exchange and takes back the other shards' sum. Never awaited by a request: a slow or
   * failed exchange leaves the last known loads in place (they drain and decay in the model),
   * which is the reports-only behaviour.
   */
  private syncLoad(router: RegionRouter, shard: number, now: number): void {
    const interval = exchangeIntervalMs(router.settings.shards, this.regionReportsPerSecond);
    if (router.settings.shards <= 1 || this.loadSyncing || now - this.lastLoadSync < interval) return;
    this.ctx.waitUntil(this.exchangeWithRegion(router, shard, now));
  }

  /** One exchange: this shard's load out; the others' load and the node reports it has not seen back. */
  private async exchangeWithRegion(router: RegionRouter, shard: number, now: number): Promise<void> {
    this.loadSyncing = true;
    this.lastLoadSync = now;
    try {
      const exchange = loadExchangeStub(this.env, router.settings.name);
      const answer = await exchange.exchange({ shard, load: router.ownLoad(now), feed: this.feedSeen });
      if (this.host.router() !== router) return;
      router.shareForeignLoad(shardLoadsSchema.parse(answer.loads), Date.now());
      const feed = nodeFeedSchema.parse(answer.feed);
      this.regionReportsPerSecond = Math.max(0, Number(answer.reportsPerSecond) || 0);
      // The exchange keeps each node's last_seen durably; a shard writes a node's row only when it
      // changes (a restarted shard takes the whole feed at its first exchange).
      for (const r of feed.reports) await this.host.applyReport(router, r, Date.now(), false);
      for (const id of feed.removed) if (router.removeNode(id)) this.host.forget(id);
      this.feedSeen = { epoch: feed.epoch, version: feed.version };
    } catch (e) {
      console.error(JSON.stringify({ event: "shard_load_exchange_error", region: router.settings.name, message: String(e) }));
    } finally {
      this.loadSyncing = false;
    }
  }
}
