/**
 * Reading a request body with a hard size limit. `Content-Length` is checked first (cheap
 * rejection); a body without one (chunked) is counted as it streams and abandoned as soon as it
 * passes the limit, so an oversized upload never sits in memory whole.
 */
import { ApiError } from "./errors.ts";

export async function readBodyLimited(request: Request, maxBytes: number): Promise<Uint8Array> {
  const tooLarge = () => ApiError.tooLarge(maxBytes);
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) throw tooLarge();
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel();
      throw tooLarge();
    }
    chunks.push(value);
  }
  return concatBytes(chunks);
}

/** The parts as one array (the part itself when there is only one). */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  let total = 0;
  for (const p of parts) total += p.byteLength;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.byteLength;
  }
  return out;
}

/** Parses a JSON body, answering 400 with the parser's reason when it is not JSON. */
export function parseJsonBody(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw ApiError.invalidJson("Request body is not valid UTF-8");
  }
  if (text.trim() === "") throw ApiError.invalidJson("Request body is empty: expected a JSON object");
  try {
    return JSON.parse(text);
  } catch (e) {
    throw ApiError.invalidJson(`Request body is not valid JSON: ${(e as Error).message}`);
  }
}
