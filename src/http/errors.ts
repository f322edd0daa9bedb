/**
 * Errors in OpenAI's shape: `{"error":{"message","type","code"}}`, so that OpenAI SDKs surface
 * them as typed API errors. Messages name the bad field or header and never echo a credential.
 */

export type ErrorType =
  "invalid_request_error" | "authentication_error" | "permission_error" | "not_found_error" | "rate_limit_error" | "server_error";

/** An error a handler throws to answer with `status`; rendered by the app's error handler. */
export class ApiError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: string;
  readonly param: string | null;
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    message: string,
    type: ErrorType,
    code: string,
    options: { param?: string | null; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.status = status;
    this.type = type;
    this.code = code;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }
}

/** Renders an OpenAI-shaped error response. */
export function errorResponse(
  status: number,
  message: string,
  type: ErrorType,
  code: string,
  options: { param?: string | null; headers?: Record<string, string> } = {},
): Response {
  const body = JSON.stringify({ error: { message, type, code, param: options.param ?? null } });
  return new Response(body, {
    status,
    headers: { "content-type": "application/json", ...options.headers },
  });
}

export function apiErrorResponse(e: ApiError, extraHeaders: Record<string, string> = {}): Response {
  return errorResponse(e.status, e.message, e.type, e.code, { param: e.param, headers: { ...e.headers, ...extraHeaders } });
}

/** The SSE event that ends a stream whose node failed after the first byte. */
export function sseErrorEvent(message: string, code: string): string {
  return `data: ${JSON.stringify({ error: { message, type: "server_error", code, param: null } })}\n\n`;
}
