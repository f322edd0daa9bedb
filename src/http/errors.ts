/**
 * Errors in OpenAI's shape: `{"error":{"message","type","code","param"}}`, so that OpenAI SDKs
 * surface them as typed API errors. Messages name the bad field or header and never echo a
 * credential. Handlers throw an {@link ApiError} from one of its named constructors; the app's
 * error handler renders it.
 */

export type ErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "not_found_error"
  | "rate_limit_error"
  | "insufficient_quota"
  | "server_error";

/**
 * What refused a request the edge could not serve (src/edge/forward.ts), for its one `refusal`
 * line and `warmpath_edge_refusals_total` (src/edge/middleware/refusal-log.ts): the reason, and
 * what the regions said. Ids and figures only, never what the client sent.
 */
export interface RefusalDetail {
  /** A closed set: `rate-limited`, `over-budget`, `over-share`, `shed`, `saturated`, `no-node`, `failed`, `region-unavailable`, `no-region`, `unknown-response`. */
  reason: string;
  model?: string | undefined;
  prompt_tokens_estimated?: number | undefined;
  /** Every region and node tried, and how each attempt ended (bounded by the region contract's MAX_ATTEMPTS). */
  attempts?: ReadonlyArray<{ region: string; node?: string | undefined; outcome: string }> | undefined;
  /** A shed request's class, objective and time queued (ms). */
  priority?: string | undefined;
  objective_ms?: number | undefined;
  queued_ms?: number | undefined;
  /** A request shed at arrival: its soonest first token as the region predicted it, after the queue (ms from its arrival there), past what its objective had left then (`objective_ms` less the time already spent, e.g. in a region it failed over from). */
  estimated_ttft_ms?: number | undefined;
  /** A shed request's lowered class: `share` or `commitment`. */
  demoted?: string | undefined;
}

interface ErrorOptions {
  /** The request field or header at fault (`param` in the body). */
  param?: string | null | undefined;
  /** Extra response headers, e.g. `retry-after`. */
  headers?: Record<string, string> | undefined;
}

/** An error a handler throws to answer with `status`; rendered by the app's error handler. */
export class ApiError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: string;
  readonly param: string | null;
  readonly headers: Record<string, string>;
  /** Set when a region (or the lack of one) refused the request: what its refusal line says ({@link refusedBy}). */
  refusal: RefusalDetail | undefined = undefined;

  private constructor(status: number, type: ErrorType, code: string, message: string, options: ErrorOptions = {}) {
    super(message);
    this.status = status;
    this.type = type;
    this.code = code;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  /** 400: the request is malformed (`code` defaults to `invalid_request`). */
  static invalidRequest(message: string, param?: string | null, code = "invalid_request"): ApiError {
    return new ApiError(400, "invalid_request_error", code, message, { param });
  }

  /** 400: the body is not JSON (never quotes the body). */
  static invalidJson(message: string): ApiError {
    return new ApiError(400, "invalid_request_error", "invalid_json", message);
  }

  /** 401: a credential is missing or wrong. */
  static authentication(code: string, message: string): ApiError {
    return new ApiError(401, "authentication_error", code, message);
  }

  /** 403: the credential is valid but not for this. */
  static permission(code: string, message: string, param?: string | null): ApiError {
    return new ApiError(403, "permission_error", code, message, { param });
  }

  /** 404: no such model, region, node or route. */
  static notFound(code: string, message: string, param?: string | null, type: ErrorType = "not_found_error"): ApiError {
    return new ApiError(404, type, code, message, { param });
  }

  /**
   * 400 `previous_response_not_found`: no stored response of this tenant has the id (another
   * tenant's, expired, or never stored through this router; docs/API.md, "Stored responses"). As
   * OpenAI answers it (status, type, code, param and message: an unknown id is a bad parameter
   * there, not a missing route), so SDKs raise the same error. The id is the client's own, bounded
   * by the request schema (256 characters), and JSON-escaped in the body.
   */
  static previousResponseNotFound(id: string): ApiError {
    return new ApiError(400, "invalid_request_error", "previous_response_not_found", `Previous response with id '${id}' not found.`, {
      param: "previous_response_id",
    });
  }

  /** 405 with `Allow`: the path is served, for other methods. */
  static methodNotAllowed(message: string, allowed: readonly string[]): ApiError {
    return new ApiError(405, "invalid_request_error", "method_not_allowed", message, { headers: { allow: allowed.join(", ") } });
  }

  /** 413: the body is over the limit. */
  static tooLarge(maxBytes: number): ApiError {
    return new ApiError(413, "invalid_request_error", "request_too_large", `Request body exceeds the limit of ${maxBytes} bytes`);
  }

  /** 415: not a JSON body. */
  static unsupportedMediaType(message: string): ApiError {
    return new ApiError(415, "invalid_request_error", "unsupported_media_type", message);
  }

  /** 431: the request's headers, or one header, over a bound (`param`: the header, when one is at fault). */
  static headersTooLarge(message: string, param?: string | null): ApiError {
    return new ApiError(431, "invalid_request_error", "request_headers_too_large", message, { param });
  }

  /** 414: the request's URL over a bound. */
  static uriTooLong(message: string): ApiError {
    return new ApiError(414, "invalid_request_error", "uri_too_long", message);
  }

  /** 503 with `Retry-After`: no node can take the request now. */
  static noCapacity(message: string, retryAfterSeconds: number): ApiError {
    return new ApiError(503, "server_error", "no_capacity", message, { headers: { "retry-after": String(retryAfterSeconds) } });
  }

  /** 429 with `Retry-After`: the tenant is over its fair share of the capacity that could serve it. */
  static overShare(message: string, retryAfterSeconds: number): ApiError {
    return new ApiError(429, "rate_limit_error", "tenant_over_share", message, { headers: { "retry-after": String(retryAfterSeconds) } });
  }

  /**
   * 429 with `Retry-After`: no region can give the request its first token within its objective,
   * even after its queue (docs/ADMISSION.md). Code `objective_unreachable`, so a client tells it
   * from its own rate limit; `Retry-After` is the time the region's queued prefill takes to drain.
   */
  static objectiveUnreachable(message: string, retryAfterSeconds: number): ApiError {
    return new ApiError(429, "rate_limit_error", "objective_unreachable", message, {
      headers: { "retry-after": String(retryAfterSeconds) },
    });
  }

  /** 429 with `Retry-After` and OpenAI's `x-ratelimit-*` headers: the tenant spent its rate limit. */
  static rateLimited(message: string, retryAfterSeconds: number, headers: Record<string, string> = {}): ApiError {
    return new ApiError(429, "rate_limit_error", "rate_limit_exceeded", message, {
      headers: { ...headers, "retry-after": String(retryAfterSeconds) },
    });
  }

  /**
   * 429 with `Retry-After` until the budget resets: the tenant spent its budget (docs/USAGE.md). Type
   * and code `insufficient_quota`, as OpenAI answers an account out of credit, so SDKs and clients
   * that already tell it from a rate limit (and do not retry it) do the same here.
   */
  static insufficientQuota(message: string, retryAfterSeconds: number): ApiError {
    return new ApiError(429, "insufficient_quota", "insufficient_quota", message, {
      headers: { "retry-after": String(retryAfterSeconds) },
    });
  }

  /**
   * 429 with `Retry-After` and `x-ratelimit-*-requests`: the tenant is over the edge's request
   * ceiling (src/config/edge-ceiling.ts), a backstop far above its own limits.
   */
  static edgeRateLimited(limitPerMinute: number, periodSeconds: number): ApiError {
    return new ApiError(
      429,
      "rate_limit_error",
      "edge_rate_limit_exceeded",
      `This tenant sent more than ${limitPerMinute} requests a minute through this edge location, twice the most its rate limits allow. Retry after ${periodSeconds} s.`,
      {
        headers: {
          "retry-after": String(periodSeconds),
          "x-ratelimit-limit-requests": String(limitPerMinute),
          "x-ratelimit-remaining-requests": "0",
          "x-ratelimit-reset-requests": `${periodSeconds}s`,
        },
      },
    );
  }

  /** 503 with `Retry-After`: a region's worker (or every region's, for inference) could not be reached. */
  static regionUnavailable(message: string, retryAfterSeconds = 5): ApiError {
    return new ApiError(503, "server_error", "region_unavailable", message, { headers: { "retry-after": String(retryAfterSeconds) } });
  }

  /** 500: something the operator must fix (`invalid_configuration`) or a bug (`internal_error`). */
  static server(code: string, message: string): ApiError {
    return new ApiError(500, "server_error", code, message);
  }

  /** Says what refused the request, for its refusal line and counter. */
  refusedBy(detail: RefusalDetail): this {
    this.refusal = detail;
    return this;
  }

  /** This error as an OpenAI-shaped response. */
  toResponse(extraHeaders: Record<string, string> = {}): Response {
    const body = JSON.stringify({ error: { message: this.message, type: this.type, code: this.code, param: this.param } });
    return new Response(body, {
      status: this.status,
      headers: { "content-type": "application/json", ...this.headers, ...extraHeaders },
    });
  }
}

/** The SSE event that ends a stream whose node failed after the first byte. */
export function sseErrorEvent(message: string, code: string): string {
  return `data: ${JSON.stringify({ error: { message, type: "server_error", code, param: null } })}\n\n`;
}
