/**
 * A placed request's session with the region object that placed it (durable-objects/region.ts):
 * `route` returns it, and the request's first byte and completion are calls on it.
 */
import { RpcTarget } from "cloudflare:workers";
import type { CompletionOutcome, RouteSessionApi } from "../src/contracts/region-object.ts";

/**
 * What a session asks of the object that placed its request (RegionDurableObject's `tickets`: not
 * RPC methods, so the ticket, the object's own value, is never validated again). The response id
 * and the outcome come from the worker and are validated there.
 */
interface TicketHolder {
  firstByte(ticket: string, responseId?: unknown): void;
  complete(ticket: string, outcome: unknown): boolean;
}

/**
 * A placed request's session with the object that placed it: `route` returns it, and its first
 * byte and completion are calls on it. Workers RPC keeps calls on an RpcTarget a call returned in
 * that call's session, which Cloudflare bills as one object request: one billed request per
 * client request instead of three (route, firstByte, complete; docs/SCALING.md, B1). It holds
 * only the ticket: a session outliving an object restart fails its calls, as a ticket would.
 */
export class RouteSession extends RpcTarget implements RouteSessionApi {
  private readonly object: TicketHolder;
  private readonly ticket: string;

  constructor(object: TicketHolder, ticket: string) {
    super();
    this.object = object;
    this.ticket = ticket;
  }

  firstByte(responseId?: string): void {
    this.object.firstByte(this.ticket, responseId);
  }

  complete(outcome: CompletionOutcome): boolean {
    return this.object.complete(this.ticket, outcome);
  }
}
