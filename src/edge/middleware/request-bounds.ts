/**
 * Bounds on a request's head, checked before anything reads it: the URL's length (414) and the
 * headers' size, in total and per value (431), both answered in OpenAI's error shape.
 *
 * What the runtime does already: Cloudflare's edge refuses URLs over 16 KB and request headers
 * over 128 KB in total before the worker runs. workerd under `wrangler dev` is far looser:
 * measured with wrangler 4.164, a single 497,656-byte header still reached the worker, and past
 * ~512 KB of head workerd answered a plain-text `431 message head is too large` (not OpenAI's
 * shape). So without these bounds a local server and a deployed one would accept different
 * requests, and a client would get errors its SDK cannot parse. The bounds are the same everywhere,
 * and well inside both.
 */
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../app-types.ts";
import { ApiError } from "../../http/errors.ts";

/**
 * Longest request URL (characters, as the worker sees it: scheme, host, path and query).
 *
 * Why 8 KiB: the longest URL warmpath routes is `/v1/models/{id}` with a model id of at most 256
 * characters; 8 KiB is 30 times that, and half the 16 KB Cloudflare's edge allows.
 */
export const MAX_URL_BYTES = 8 * 1024;

/**
 * Most bytes of one header's value (several headers of one name count together, as the
 * `Headers` API joins them).
 *
 * Why 8 KiB: the longest values a client sends warmpath are its key and session id (used up to
 * 512 characters); an API key is under 200 bytes and a large JWT a few KB. 8 KiB passes both.
 */
export const MAX_HEADER_VALUE_BYTES = 8 * 1024;

/**
 * Most bytes of all headers together (each counted as `name: value` plus its line end).
 *
 * Why 32 KiB: the OpenAI and Anthropic SDKs send about 1 KB of headers (a dozen `x-stainless-*`
 * or `anthropic-*` headers and the key), a browser a few KB more; 32 KiB is far past either, and a
 * quarter of the 128 KB Cloudflare's edge accepts.
 */
export const MAX_HEADER_BYTES = 32 * 1024;

/**
 * Headers warmpath reads: named in a 431's `param` when one of them is over the bound. Any other
 * header is not named (its name came from the client, and errors never repeat what it sent).
 */
const KNOWN_HEADERS = new Set([
  "authorization",
  "x-api-key",
  "content-type",
  "content-length",
  "x-session-id",
  "x-request-id",
  "x-warmpath-region",
  "x-warmpath-namespace",
  "x-warmpath-priority",
  "x-warmpath-ttft-objective-ms",
  "anthropic-version",
  "anthropic-beta",
  "openai-beta",
  "origin",
  "host",
  "cookie",
  "user-agent",
]);

/** The URL and header bounds, as a middleware (mounted first: src/edge/app.ts). */
export const requestBounds = createMiddleware<AppEnv>(async (c, next) => {
  checkRequestBounds(c.req.raw);
  await next();
});

/** Throws 414 or 431 if the request is over a bound. */
function checkRequestBounds(request: Request): void {
  if (request.url.length > MAX_URL_BYTES) {
    throw ApiError.uriTooLong(`Request URL is longer than ${MAX_URL_BYTES} characters (the limit)`);
  }
  let total = 0;
  for (const [name, value] of request.headers) {
    // Counted in characters as the Headers API gives them (one per byte for ASCII); `: ` and the line end are 4 more.
    if (value.length > MAX_HEADER_VALUE_BYTES) {
      const known = KNOWN_HEADERS.has(name);
      throw ApiError.headersTooLarge(
        `${known ? `Request header ${name}` : "A request header"} is longer than ${MAX_HEADER_VALUE_BYTES} bytes (the limit)`,
        known ? name : null,
      );
    }
    total += name.length + value.length + 4;
    if (total > MAX_HEADER_BYTES) {
      throw ApiError.headersTooLarge(`Request headers exceed ${MAX_HEADER_BYTES} bytes in total (the limit)`);
    }
  }
}
