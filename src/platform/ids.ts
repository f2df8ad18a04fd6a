import { sha256Hex } from "./hash.ts";

const randomBytes = (length: number) => crypto.getRandomValues(new Uint8Array(length));

/**
 * A new id with its type prefix (`prd_`, `whk_`, `evt_`): 128 random bits as 32 hex characters. `bytes` is for a
 * repeatable source (the sample seed, scripts/seed.ts), so that every id has this one form.
 */
export const newId = (prefix: string, bytes: (length: number) => Uint8Array = randomBytes) =>
  `${prefix}_${Array.from(bytes(16), (byte) => byte.toString(16).padStart(2, "0")).join("")}`;

/**
 * An event id that carries its event's timestamp: 12 hex digits of Unix milliseconds, then 80 random
 * bits (the same `evt_` + 32 hex as before). The feed finds an archived cursor's event from its id alone.
 */
export const newEventId = (timestamp: string) =>
  `evt_${Date.parse(timestamp).toString(16).padStart(12, "0")}${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;

/** The timestamp newEventId put in an id (an id made otherwise gives a meaningless one). */
export const eventIdTime = (id: string) => new Date(Number.parseInt(id.slice(4, 16), 16)).toISOString();

/**
 * An event id that is the same whenever the same thing is announced (`what` names it: the event type and
 * what makes it that event, e.g. the key, the day and the threshold), the same shape as any event id.
 * Written with INSERT OR IGNORE (the events' unique id), the event exists once however many runs,
 * isolates, objects or retries announce it.
 */
export const derivedEventId = async (what: string): Promise<string> => `evt_${await sha256Hex(what, 16)}`;
