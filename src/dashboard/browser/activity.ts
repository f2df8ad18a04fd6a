/**
 * The Activity view: what happened to the account's keys and webhooks in the last 30 days (GET /account/events),
 * newest first: a key found in public, a key about to expire, a webhook disabled, a key at 80 % or 100 % of its day; those
 * of the environment shown (environment.ts).
 */
import type { components } from "../../../client/schema.d.ts";
import { api } from "./api.ts";
import { byId, el, formatDateTime, whenRelative } from "./dom.ts";
import { type Environment, environment, TEST_KEY_PREFIX } from "./environment.ts";
import { webhookEnvironment } from "./webhooks.ts";

type AccountEvent = components["schemas"]["AccountFeedEvent"];
type Feed = components["schemas"]["AccountEventFeed"];

/** The feed pages oldest first; an account's events are few, so the page reads them all (bounded) and turns them round. */
const PAGE_SIZE = 1000;
const MAX_PAGES = 5;

async function accountEvents(): Promise<AccountEvent[]> {
  const events: AccountEvent[] = [];
  let after: string | null = null;
  for (let page = 0; page < MAX_PAGES; page++) {
    const query: URLSearchParams = new URLSearchParams({ limit: String(PAGE_SIZE), ...(after ? { after } : {}) });
    const feed: Feed = await api<Feed>("GET", `/account/events?${query}`);
    events.push(...feed.events);
    if (feed.events.length < PAGE_SIZE || !feed.next_cursor) break;
    after = feed.next_cursor;
  }
  return events.reverse();
}

/** Which environment an event is about: a key's by its prefix, a webhook's by the list. */
const eventEnvironment = (event: AccountEvent): Environment =>
  event.type === "webhook.disabled"
    ? webhookEnvironment(event.data.webhook_id)
    : event.data.prefix.startsWith(TEST_KEY_PREFIX)
      ? "test"
      : "live";

const days = (n: number) => `${n} day${n === 1 ? "" : "s"}`;

/** What an event says, as a label and a sentence. */
function told(event: AccountEvent): [string, string] {
  switch (event.type) {
    case "api_key.leaked": {
      const { name, prefix, url } = event.data;
      return ["Key found in public", `“${name}” (${prefix}…) was found in public${url ? ` at ${url}` : ""} and revoked.`];
    }
    case "api_key.expiring": {
      const { name, prefix, expires_at, days_left } = event.data;
      return ["Key expiring", `“${name}” (${prefix}…) expires in ${days(days_left)}, on ${formatDateTime(expires_at)}.`];
    }
    case "webhook.disabled":
      return ["Webhook disabled", `${event.data.url} no longer receives events: ${event.data.disabled_reason}`];
    case "usage.threshold": {
      const { prefix, threshold, used, limit } = event.data;
      return [
        "Day quota",
        `Key ${prefix}… used ${threshold} % of its day quota: ${used.toLocaleString()} of ${limit.toLocaleString()} requests.`,
      ];
    }
  }
}

function item(event: AccountEvent): HTMLLIElement {
  const [label, sentence] = told(event);
  const serious = event.type === "api_key.leaked" || event.type === "webhook.disabled";
  return el(
    "li",
    { class: "activity-item", "data-type": event.type },
    el("span", { class: `badge ${serious ? "revoked" : "expired"}` }, label),
    el("span", { class: "activity-text" }, sentence),
    whenRelative(event.timestamp),
  );
}

export async function loadActivity(): Promise<void> {
  const events = (await accountEvents()).filter((event) => eventEnvironment(event) === environment());
  byId("activity").replaceChildren(
    events.length
      ? el("ul", { class: "activity" }, ...events.map(item))
      : el(
          "div",
          { class: "empty-state" },
          el(
            "p",
            {},
            el(
              "strong",
              {},
              `Nothing to report${environment() === "test" ? " about your test keys and webhooks" : ""} in the last 30 days.`,
            ),
            " A key found in public, a key about to expire, a disabled webhook, or a key reaching 80 % or 100 % of " +
              "its day quota shows here, and goes to your webhooks that subscribe to it.",
          ),
        ),
  );
}
