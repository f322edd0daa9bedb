/**
 * Where a region's Durable Object should live: near its GPUs. Every routing decision pays the
 * worker-to-object round trip, and the object then stays where it was first created, so the
 * first `getByName` must carry a location hint (Cloudflare places the object in or near that
 * area). The hint is the region's `location_hint` if configured, or derived here from the GPUs'
 * coordinates, using Cloudflare's hint areas:
 * wnam/enam (western/eastern North America), sam, weur/eeur, apac, apac-ne, apac-se, oc, afr, me.
 */

export const LOCATION_HINTS = ["wnam", "enam", "sam", "weur", "eeur", "apac", "apac-ne", "apac-se", "oc", "afr", "me"] as const;

export type LocationHint = (typeof LOCATION_HINTS)[number];

/** North America is split at 100 degrees west (roughly the Great Plains), Europe at 15 degrees east (Vienna). */
const NORTH_AMERICA_SPLIT_LON = -100;
const EUROPE_SPLIT_LON = 15;

/** The hint area of a point: continent boxes first, then the split meridians. */
export function locationHintFor(lat: number, lon: number): LocationHint {
  // The Middle East: the Arabian peninsula and the Levant to Iran.
  if (lat >= 12 && lat <= 42 && lon >= 34 && lon <= 63) return "me";
  // Africa (south of the Mediterranean, west of the Red Sea).
  if (lat < 35 && lat > -36 && lon >= -18 && lon < 52) return "afr";
  // Europe.
  if (lat >= 35 && lon >= -25 && lon < 45) return lon < EUROPE_SPLIT_LON ? "weur" : "eeur";
  // The Americas.
  if (lon < -30) {
    if (lat < 13) return "sam";
    return lon < NORTH_AMERICA_SPLIT_LON ? "wnam" : "enam";
  }
  // Oceania: Australia and New Zealand.
  if (lat < -10 && lon >= 110) return "oc";
  // Asia-Pacific: north-east (Japan, Korea, northern China coast), south-east, the rest.
  if (lon >= 120 && lat >= 30) return "apac-ne";
  if (lat < 15 && lon >= 90) return "apac-se";
  return "apac";
}
