import { concatBytes } from "../http/body.ts";
import { USAGE_TAIL_CHARS } from "./usage.ts";

/**
 * The last bytes of an answer, enough to hold its usage and its terminator: the chunks as they
 * came, the oldest dropped while the rest still hold {@link USAGE_TAIL_CHARS} bytes, decoded only
 * when read (at the end), instead of decoding and joining the text at every chunk (per SSE event)
 * for a text read once. (The usage and the terminator are ASCII, so bytes count as characters here;
 * a character cut at the tail's start decodes as U+FFFD, before anything read.)
 */
export class AnswerTail {
  private chunks: Uint8Array[] = [];
  private size = 0;
  /** The chunks decoded, until the next push: the relay reads the tail twice at the end (terminator, usage). */
  private decoded: string | undefined;
  /**
   * The answer's first {@link USAGE_TAIL_CHARS} bytes, kept as they came: an Anthropic stream says
   * its prompt's counts in its first event (`message_start`) and only the completion's at its end,
   * so an answer longer than the tail has its prompt's counts here alone.
   */
  private readonly headChunks: Uint8Array[] = [];
  private headSize = 0;

  push(chunk: Uint8Array): void {
    if (this.headSize < USAGE_TAIL_CHARS) {
      const part = chunk.byteLength <= USAGE_TAIL_CHARS - this.headSize ? chunk : chunk.subarray(0, USAGE_TAIL_CHARS - this.headSize);
      this.headChunks.push(part);
      this.headSize += part.byteLength;
    }
    this.decoded = undefined;
    this.chunks.push(chunk);
    this.size += chunk.byteLength;
    while (this.chunks.length > 1 && this.size - this.chunks[0]!.byteLength >= USAGE_TAIL_CHARS)
      this.size -= this.chunks.shift()!.byteLength;
  }

  text(): string {
    return (this.decoded ??= new TextDecoder().decode(concatBytes(this.chunks)));
  }

  /** The answer's first bytes, decoded (read once, at the end). */
  head(): string {
    return new TextDecoder().decode(concatBytes(this.headChunks));
  }
}
