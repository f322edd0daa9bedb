/**
 * Which region init a region object routes by while two versions of its region's worker run at
 * once (a gradual deployment: Cloudflare splits a worker's traffic between two versions by
 * percentage, and both call the same objects). Each version's calls carry its own configuration's
 * init; an object that took every init it was given would rebuild its router, dropping its prefix
 * index, its load model and its queue, at every switch between the two: at a 50/50 split, about
 * every other request.
 *
 * So inits are ordered by their worker version's upload time (`generation`, the version metadata
 * binding's timestamp: src/config/load.ts). A newer init replaces the one in force at once; an
 * older one does not while the one in force is still being used (a call carried it within
 * {@link OLDER_INIT_AFTER_MS}): the older version's calls are routed by the newer configuration
 * until its split ends. An older init is taken once the newer has not been seen for that long,
 * which is how a rollback to an earlier version takes effect. Inits without a generation (a local
 * run, the tests, a version without the binding) are taken as they come, as before.
 *
 * Pure: the time is passed in. Holds a few fingerprints at most.
 */

/**
 * How long the init in force must go unused before an older one replaces it (a rollback's delay).
 * A gradual deployment sends each version a share of every second's traffic, so a newer init in
 * use is seen many times a minute; a rollback leaves the newer one unseen, and takes over a
 * minute later (docs/DEPLOY.md).
 */
export const OLDER_INIT_AFTER_MS = 60_000;

/** Older inits remembered as routed by the one in force (their versions' calls then need no init again). */
const MAX_DEFERRED = 8;

/** What the order needs of an init: its fingerprint, and its worker version's upload time (ms epoch), if known. */
export interface OrderedInit {
  fingerprint: string;
  generation?: number | undefined;
}

export class InitOrder {
  private current: { fingerprint: string; generation: number | undefined; seenAt: number } | undefined;
  /** Older inits' fingerprints whose calls the init in force routes (see the module's comment). */
  private readonly deferred = new Set<string>();

  /** The init in force: its fingerprint and generation (for a log line). */
  get inForce(): OrderedInit | undefined {
    return this.current && { fingerprint: this.current.fingerprint, generation: this.current.generation };
  }

  /**
   * The init in force, carried by a call at `seenAt`; or, without one, read back from storage at a
   * restart: not known to be in use, so an older init (a rollback) is not held back by it.
   */
  adopt(init: OrderedInit, seenAt: number | undefined): void {
    this.current = { fingerprint: init.fingerprint, generation: init.generation, seenAt: seenAt ?? -Infinity };
    this.deferred.clear();
  }

  /**
   * A call carrying `fingerprint` (and its init's generation, when it carries the whole init):
   * whether the router in force serves it (the init in force, or an older one it is routing for),
   * else the caller must send its init. A newer version with the same configuration makes the init
   * in force as new as it (an older version's init then does not replace it).
   */
  serves(fingerprint: string, now: number, generation?: number): boolean {
    const c = this.current;
    if (!c) return false;
    if (c.fingerprint === fingerprint) {
      c.seenAt = now;
      if (generation !== undefined && (c.generation === undefined || generation > c.generation)) c.generation = generation;
      return true;
    }
    return this.deferred.has(fingerprint) && this.holds(now);
  }

  /**
   * A call carrying a whole init other than the one in force: whether it replaces it (the caller
   * then rebuilds and {@link adopt}s it), or is routed by the one in force (an older version's,
   * while the newer one is in use).
   */
  replaces(init: OrderedInit, now: number): boolean {
    const c = this.current;
    if (!c || init.fingerprint === c.fingerprint) return true;
    const older = init.generation !== undefined && c.generation !== undefined && init.generation < c.generation;
    if (!older || !this.holds(now)) return true;
    if (this.deferred.size >= MAX_DEFERRED) this.deferred.clear();
    this.deferred.add(init.fingerprint);
    return false;
  }

  /** The init in force was used recently enough that an older one does not replace it. */
  private holds(now: number): boolean {
    return this.current !== undefined && now - this.current.seenAt < OLDER_INIT_AFTER_MS;
  }
}
