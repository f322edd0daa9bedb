/**
 * Bytes as lowercase hex, the one form ids, digests and signatures take on the wire and in logs.
 * A table of the 256 byte values: the request path formats several ids and digests per request
 * (a trace's span ids, the API key's and the internal signature's SHA-256), and the five copies
 * this replaces spread each digest into an array and built two strings per byte.
 */
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** The two lowercase hex digits of a byte (0-255). */
export function byteHex(b: number): string {
  return HEX[b & 0xff]!;
}

/** `bytes` as lowercase hex, two characters a byte. */
export function bytesToHex(bytes: Uint8Array | ArrayBuffer): string {
  const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  let out = "";
  for (let i = 0; i < view.length; i++) out += HEX[view[i]!]!;
  return out;
}

/** SHA-256 of a string's UTF-8 bytes, lowercase hex. */
export async function sha256Hex(text: string): Promise<string> {
  return bytesToHex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
}
