/**
 * The responses a node produced and stored (Responses API, `store` true), in its process's memory:
 * a follow-up's `previous_response_id` is found here or not at all (vLLM's `response_store` and
 * `msg_store`, with `VLLM_ENABLE_RESPONSES_API_STORE=1`). A restart or crash loses them all.
 * vLLM never forgets one; this store is bounded, oldest forgotten first.
 */

/** A chat message, as the Responses API's items become one (responses.ts) and prompt.ts renders it. */
export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: unknown[];
  tool_call_id?: string;
}

export interface StoredResponse {
  /** The chat messages of the request that produced it (its instructions as a system message first). */
  messages: ChatMessage[];
  /** Its output as chat messages: the answer, or the function call, as the assistant's. */
  output: ChatMessage[];
}

/** Responses kept per node, at most. */
export const RESPONSES_KEPT = 1_000;
/** Characters of stored conversations kept per node, at most (a long conversation counts its length). */
export const RESPONSE_STORE_CHARS = 16 * 1024 * 1024;

export class ResponseStore {
  private readonly entries = new Map<string, { response: StoredResponse; chars: number }>();
  private chars = 0;

  get size(): number {
    return this.entries.size;
  }

  get(id: string): StoredResponse | undefined {
    return this.entries.get(id)?.response;
  }

  /** Stores a response; forgets the oldest past the bounds. One alone over the character bound is not kept. */
  set(id: string, response: StoredResponse): void {
    const chars = JSON.stringify(response).length;
    if (chars > RESPONSE_STORE_CHARS) return;
    this.entries.set(id, { response, chars });
    this.chars += chars;
    while (this.entries.size > RESPONSES_KEPT || this.chars > RESPONSE_STORE_CHARS) {
      const [oldest, entry] = this.entries.entries().next().value!;
      this.entries.delete(oldest);
      this.chars -= entry.chars;
    }
  }
}
