import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { z } from "zod";
import { logger } from "../../platform/log.ts";
import { eventTypes } from "./schema.ts";
import { EventsError, type EventsServices, pollEvents, subscribeEvents, unsubscribeEvents } from "./service.ts";

/**
 * The events extension's methods, each answered by its service (src/mcp/events/service.ts); the platform tests
 * (tenants apart, environments, work budget) list their calls against these names, as they do against the tools.
 */
export const EVENT_METHODS = {
  "events/list": async () => ({ events: eventTypes() }),
  "events/poll": pollEvents,
  "events/subscribe": subscribeEvents,
  "events/unsubscribe": unsubscribeEvents,
} satisfies Record<string, (services: EventsServices, params: unknown) => Promise<unknown>>;

/** An EventsError goes out as it is (its code, message and data); anything else is logged and answered -32603, never a stack. */
class MethodFailed extends Error {
  readonly code = -32603;
}

/**
 * Registers the methods on the SDK's low-level server (its setRequestHandler takes a method's request schema); the params
 * are left whole to the service, which answers a bad one with -32602 naming the field. The capability says so at
 * initialize: the event types never change while a server lives (one per request), so no list_changed.
 */
export function registerEventMethods(server: Server, services: EventsServices): void {
  server.registerCapabilities({ events: { listChanged: false } } as Parameters<Server["registerCapabilities"]>[0]);
  for (const [method, run] of Object.entries(EVENT_METHODS)) {
    const request = z.object({ method: z.literal(method), params: z.unknown().optional() });
    server.setRequestHandler(request, async ({ params }) => {
      try {
        return (await run(services, params)) as Record<string, unknown>;
      } catch (error) {
        if (error instanceof EventsError) throw error;
        logger("mcp").error("events method failed", { method, error: String(error) });
        throw new MethodFailed("The method failed; try again later.");
      }
    });
  }
}
