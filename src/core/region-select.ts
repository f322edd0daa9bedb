/**
 * Nearest-region choice. Regions are ordered by great-circle distance from the client (Cloudflare
 * gives the client's coordinates in `request.cf`), falling back to a continent match and then to
 * configuration order when a request has no coordinates. The worker tries them in that order, so
 * a region that is down or saturated fails over to the next nearest.
 */

export interface RegionLocation {
  name: string;
  location: { lat: number; lon: number; continent?: string | undefined };
  models: readonly string[];
}

export interface ClientLocation {
  lat?: number | undefined;
  lon?: number | undefined;
  continent?: string | undefined;
}

const EARTH_RADIUS_KM = 6371;

/** Great-circle distance in km (haversine). */
export function distanceKm(aLat: number, aLon: number, bLat: number, bLon: number): number {
  const rad = Math.PI / 180;
  const dLat = (bLat - aLat) * rad;
  const dLon = (bLon - aLon) * rad;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(aLat * rad) * Math.cos(bLat * rad) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_KM * Math.asin(Math.min(1, Math.sqrt(h)));
}

/**
 * Estimated round trip, in ms per km of great-circle distance: light in fibre covers about
 * 200 km per ms, and routes run about 1.5x the great circle, so 2 x 1.5 / 200 = 0.015 (New York to
 * London, 5,570 km: 84 ms; measured public figures are 70-80 ms).
 */
export const ROUND_TRIP_MS_PER_KM = 0.015;

/** The estimated round trip from the client to each region (ms), or undefined without the client's coordinates. */
export function roundTripMs(region: RegionLocation, client: ClientLocation): number | undefined {
  const { lat, lon } = client;
  if (lat === undefined || lon === undefined || !Number.isFinite(lat) || !Number.isFinite(lon)) return undefined;
  return distanceKm(lat, lon, region.location.lat, region.location.lon) * ROUND_TRIP_MS_PER_KM;
}

/** Regions serving `model`, nearest first. */
export function orderRegions<R extends RegionLocation>(regions: readonly R[], model: string, client: ClientLocation): R[] {
  const serving = regions.filter((r) => r.models.includes(model));
  const { lat, lon, continent } = client;
  if (lat !== undefined && lon !== undefined && Number.isFinite(lat) && Number.isFinite(lon)) {
    return serving
      .map((r, i) => ({ r, i, d: distanceKm(lat, lon, r.location.lat, r.location.lon) }))
      .sort((a, b) => a.d - b.d || a.i - b.i)
      .map((x) => x.r);
  }
  if (continent) {
    const same = serving.filter((r) => r.location.continent === continent);
    return [...same, ...serving.filter((r) => r.location.continent !== continent)];
  }
  return serving;
}
