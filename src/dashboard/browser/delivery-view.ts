/**
 * A webhook's delivery attempts as the Webhooks view shows them (src/dashboard/browser/webhooks.ts): its card's
 * health (the last delivery, the share that failed, the next retry) and the deliveries dialog's entries.
 */
import { MAX_ATTEMPTS, RETRY_DELAYS_SECONDS } from "../../webhooks/delivery/schedule.ts";
import type { Delivery } from "./api-types.ts";
import { el, facts, formatDateTime, when, whenRelative } from "./dom.ts";

/** "HTTP 200", "HTTP 500", "No response": what an attempt got back. */
const answer = (d: Delivery) => (d.status_code === null ? "No response" : `HTTP ${d.status_code}`);

/**
 * Whether an attempt's event will not be tried again because the webhook was disabled: the API says "abandoned";
 * a disabled webhook is sent nothing more, so an attempt it still lists as "retrying" is abandoned too.
 */
const abandoned = (d: Delivery, webhookDisabled: boolean) =>
  (d.outcome as string) === "abandoned" || (d.outcome === "retrying" && webhookDisabled);

/** What became of an attempt, in words. */
function outcomeWords(d: Delivery, webhookDisabled: boolean): string {
  const outcome: string = abandoned(d, webhookDisabled) ? "abandoned" : d.outcome;
  const words: Record<string, string> = {
    delivered: "delivered",
    retrying: "to be retried",
    failed: "failed for good",
    disabled: "the receiver asked to stop (410): webhook disabled",
    abandoned: "abandoned: the webhook is disabled",
  };
  return words[outcome] ?? outcome;
}

/** Each event's newest attempt (the list is newest first). */
function newestPerEvent(deliveries: Delivery[]): Delivery[] {
  const newest = new Map<string, Delivery>();
  for (const d of deliveries) if (!newest.has(d.event_id)) newest.set(d.event_id, d);
  return [...newest.values()];
}

/**
 * When a webhook's failed events are tried next: an event whose newest attempt is still "retrying"
 * is due its schedule's delay after that attempt (src/webhooks/delivery/schedule.ts,
 * ±20 % jitter, so "around"). The soonest, and how many events wait.
 */
function nextRetry(latest: Delivery[]): { at: number; attempt: number; waiting: number } | undefined {
  const due = latest
    .filter((d) => d.outcome === "retrying")
    .map((d) => ({ at: Date.parse(d.attempted_at) + (RETRY_DELAYS_SECONDS[d.attempt - 1] ?? 0) * 1000, attempt: d.attempt + 1 }))
    .sort((a, b) => a.at - b.at);
  return due[0] && { ...due[0], waiting: due.length };
}

/**
 * The card's health: the last delivery, the share of recent attempts that failed, and the next retry, which a
 * disabled webhook never has (its attempts are abandoned: the card says so instead).
 */
export function healthFacts(deliveries: Delivery[], webhookDisabled: boolean): HTMLElement {
  const last = deliveries[0];
  if (!last) return el("p", { class: "hint" }, "No deliveries yet. “Send test” makes one.");
  const failed = deliveries.filter((d) => d.outcome !== "delivered").length;
  const share = Math.round((failed / deliveries.length) * 100);
  const pairs: Array<[string, Node | string]> = [
    [
      "Last delivery",
      el(
        "span",
        {},
        el("span", { class: `badge ${last.outcome === "delivered" ? "enabled" : "disabled"}` }, answer(last)),
        " ",
        whenRelative(last.attempted_at),
      ),
    ],
    [
      "Failed attempts",
      el(
        "span",
        {},
        el("span", { class: failed ? "failing" : "" }, `${share} %`),
        el("span", { class: "hint" }, ` of the last ${deliveries.length}`),
      ),
    ],
  ];
  const latest = newestPerEvent(deliveries);
  const notRetried = latest.filter((d) => abandoned(d, webhookDisabled)).length;
  if (notRetried) {
    const events = notRetried === 1 ? "1 event" : `${notRetried} events`;
    pairs.push([
      "Not retried",
      webhookDisabled
        ? `${events}: abandoned, as the webhook is disabled. Enable it, then replay.`
        : `${events}: abandoned while the webhook was disabled. Replay to send.`,
    ]);
  }
  const retry = webhookDisabled ? undefined : nextRetry(latest);
  if (retry) {
    const due = retry.at <= Date.now() ? "due now" : `around ${formatDateTime(retry.at)}`;
    const more = retry.waiting > 1 ? ` (${retry.waiting} events waiting)` : "";
    pairs.push(["Next retry", `${due}, attempt ${retry.attempt} of ${MAX_ATTEMPTS}${more}`]);
  }
  return facts(pairs);
}

export function deliveryItem(d: Delivery, webhookDisabled: boolean): HTMLLIElement {
  const ok = d.outcome === "delivered";
  const result = answer(d);
  return el(
    "li",
    { class: "delivery" },
    el(
      "div",
      { class: "delivery-line" },
      el("span", { class: `badge ${ok ? "enabled" : "disabled"}` }, result),
      el("code", {}, d.type),
      el("span", { class: "hint" }, `attempt ${d.attempt} · ${d.duration_ms} ms · ${outcomeWords(d, webhookDisabled)}`),
      el("span", { class: "hint" }, when(d.attempted_at)),
    ),
    el("p", { class: "hint event-id" }, `Event ${d.event_id}`),
    d.error ? el("p", { class: "reason" }, d.error) : null,
    d.payload
      ? el("details", { class: "excerpt" }, el("summary", {}, "Body sent"), el("pre", {}, JSON.stringify(d.payload, null, 2)))
      : el("p", { class: "hint" }, "Body sent: not kept (a test event, or an event older than a day, which is in the archive)."),
    d.response_excerpt ? el("details", { class: "excerpt" }, el("summary", {}, "Response body"), el("pre", {}, d.response_excerpt)) : null,
  );
}
