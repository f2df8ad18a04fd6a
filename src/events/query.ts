import { z } from "zod";
import { single, strictQuery, when, wholeNumberParameter } from "../http/query.ts";
import { WEBHOOK_EVENT_TYPES } from "../platform/tables.ts";

/** GET /events' query (and GET /account/events'). `type` may be given several times (`?type=a&type=b`): the router hands over an array. */

export const DEFAULT_FEED_LIMIT = 100;
const MAX_FEED_LIMIT = 1000;

/**
 * The query of an events feed whose events are of `types` (GET /events, GET /account/events). The type enum is a
 * named component (`typeName`), so a generated client has one type for `type` given once or repeated.
 */
export function feedQuery<const T extends readonly [string, ...string[]]>(types: T, typeName: string) {
  const eventType = z.enum(types, { error: `must be one of ${types.join(", ")}` }).meta({ id: typeName });
  return strictQuery({
    after: z
      .string(single)
      .regex(/^evt_[0-9a-f]{32}$/, { error: "must be an event id (evt_ and 32 hex digits), e.g. the next_cursor of a page" })
      .optional()
      .meta({
        description:
          "Events after this one (a previous page's next_cursor, or the last id you saw); an event older than 30 days or unknown is 410",
      }),
    since: when("Events at or after this instant", "2026-01-31T12:00:00Z"),
    type: z
      .union([eventType, z.array(eventType)])
      .optional()
      .transform((type) => (type === undefined ? undefined : [type].flat()))
      .meta({ description: "Only these types; repeat the parameter for several" }),
    limit: wholeNumberParameter(
      `must be a whole number from 1 to ${MAX_FEED_LIMIT}`,
      z
        .int()
        .min(1, { error: `must be from 1 to ${MAX_FEED_LIMIT}` })
        .max(MAX_FEED_LIMIT, { error: `must be from 1 to ${MAX_FEED_LIMIT}` }),
    )
      .optional()
      .meta({ description: `Events a page, 1 to ${MAX_FEED_LIMIT} (default ${DEFAULT_FEED_LIMIT})`, example: DEFAULT_FEED_LIMIT }),
  });
}

export const eventsQuery = feedQuery(WEBHOOK_EVENT_TYPES, "EventType");
export type EventsQuery = z.output<typeof eventsQuery>;
