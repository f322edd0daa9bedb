import { describe, expect, it } from "vitest";
import { openaiErrorBody } from "../../src/proxy/node-error.ts";

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
const dec = (b: Uint8Array | undefined) => (b ? (JSON.parse(new TextDecoder().decode(b)) as unknown) : undefined);

describe("openaiErrorBody", () => {
  it("answers vLLM's error (numeric code, its own type) in OpenAI's shape, its message kept", () => {
    const vllm = {
      error: {
        message: "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens",
        type: "BadRequestError",
        param: null,
        code: 400,
      },
    };
    expect(dec(openaiErrorBody(400, enc(vllm)))).toEqual({
      error: { message: vllm.error.message, type: "invalid_request_error", code: "context_length_exceeded", param: null },
    });
  });

  it("unwraps older vLLM's bare error object, and maps the type from the status", () => {
    const old = { object: "error", message: "engine overloaded", type: "ServiceUnavailableError", param: null, code: 503 };
    expect(dec(openaiErrorBody(503, enc(old)))).toEqual({
      error: { message: "engine overloaded", type: "server_error", code: "node_error", param: null },
    });
  });

  it("leaves an error already in OpenAI's shape, and anything that is not an error, as they are", () => {
    expect(
      openaiErrorBody(400, enc({ error: { message: "m", type: "invalid_request_error", code: "context_length", param: null } })),
    ).toBeUndefined();
    expect(openaiErrorBody(400, enc({ detail: "Not Found" }))).toBeUndefined();
    expect(openaiErrorBody(400, new TextEncoder().encode("plain text"))).toBeUndefined();
  });
});
