/**
 * One bearer-token guard, in the shape of Hono's `bearerAuth` middleware (a `verifyToken`
 * option), from which the tenant, node and admin guards are made (guards.ts).
 *
 * Every guard answers the same way: no token is 401 `missing_<what>` (`unsupported_authorization_scheme`
 * when the Authorization header uses another scheme, e.g. Basic; `invalid_<what>` when it is Bearer
 * with more than one word after it, which is a credential sent, not one missing); a development credential
 * outside a local development server is 401 `development_credential_refused` (checked before any
 * comparison, so a public credential never unlocks a deployed router); a token `verifyToken`
 * rejects is 401 `invalid_<what>`. Tokens are never echoed.
 */
import type { Context, MiddlewareHandler } from "hono";
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../../app-types.ts";
import { ApiError } from "../../../http/errors.ts";
import { bearerToken, refusesDevCredential } from "./credentials.ts";

interface BearerGuardOptions {
  /** What the token is, in messages and codes: `api_key` gives `missing_api_key` / `invalid_api_key`. */
  credential: string;
  /** How to send it, for the missing-token message, e.g. "API key" or "node token". */
  label: string;
  /**
   * Checks the token (and may set context variables, e.g. the tenant). `true` admits; `false`
   * is 401 `invalid_<credential>`; throwing an {@link ApiError} answers with it.
   */
  verifyToken: (token: string, c: Context<AppEnv>) => boolean | Promise<boolean>;
  /** Admits a request without a token when true (the local development server's admin API). Default: never. */
  tokenless?: ((c: Context<AppEnv>) => boolean) | undefined;
  /**
   * A header that may carry the token instead of `Authorization: Bearer` (Anthropic's SDKs send
   * `x-api-key`). Default: none.
   */
  keyHeader?: string | undefined;
}

export function bearerGuard(options: BearerGuardOptions): MiddlewareHandler<AppEnv> {
  const { credential, label, verifyToken, tokenless, keyHeader } = options;
  return createMiddleware<AppEnv>(async (c, next) => {
    const token = bearerToken(c.req.raw) ?? (keyHeader ? c.req.header(keyHeader)?.trim() || undefined : undefined);
    if (!token) {
      // A credential sent in a form the guard cannot read is refused, never ignored: the token-free
      // admin API of a local server does not admit `Authorization: Basic ...` as if none were sent.
      const authorization = c.req.header("authorization");
      if (tokenless?.(c) && authorization === undefined) return next();
      const what = credential === "api_key" ? "key" : "token";
      // A credential in another scheme (Basic, Digest) was sent, not missing: say which scheme works.
      if (authorization !== undefined && authorization.trim() !== "" && !/^Bearer(\s|$)/i.test(authorization.trim())) {
        throw ApiError.authentication(
          "unsupported_authorization_scheme",
          `The Authorization header must use the Bearer scheme: Authorization: Bearer <${what}>`,
        );
      }
      // Bearer and more than one word (`Bearer a b`): a credential was sent, and it is not one; not missing.
      if (authorization !== undefined && /^Bearer\s+\S/i.test(authorization.trim())) {
        throw ApiError.authentication(
          `invalid_${credential}`,
          `Invalid ${label}: the Authorization header must be Bearer and one ${what}, without spaces in it`,
        );
      }
      throw ApiError.authentication(`missing_${credential}`, `Missing ${label}: send it as Authorization: Bearer <${what}>`);
    }
    if (refusesDevCredential(token, c.req.raw, c.get("config"))) {
      throw ApiError.authentication(
        "development_credential_refused",
        'Development credentials are accepted only by a local development server (mode = "development", reached over loopback)',
      );
    }
    if (!(await verifyToken(token, c))) throw ApiError.authentication(`invalid_${credential}`, `Invalid ${label}`);
    await next();
  });
}
