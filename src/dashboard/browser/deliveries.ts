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
 * When a webhook's failed events are tried next: per event its newest attempt (the list is newest
 * first); one still "retrying" is due its schedule's delay after that attempt (src/webhooks/delivery/schedule.ts,
 * ±20 % jitter, so "around"). The soonest, and how many events wait.
 */
function nextRetry(deliveries: Delivery[]): { at: number; attempt: number; waiting: number } | undefined {
  const newest = new Map<string, Delivery>();
  for (const d of deliveries) if (!newest.has(d.event_id)) newest.set(d.event_id, d);
  const due = [...newest.values()]
    .filter((d) => d.outcome === "retrying")
    .map((d) => ({ at: Date.parse(d.attempted_at) + (RETRY_DELAYS_SECONDS[d.attempt - 1] ?? 0) * 1000, attempt: d.attempt + 1 }))
    .sort((a, b) => a.at - b.at);
  return due[0] && { ...due[0], waiting: due.length };
}

/** The card's health: the last delivery, the share of recent attempts that failed, and the next retry. */
export function healthFacts(deliveries: Delivery[]): HTMLElement {
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
  const retry = nextRetry(deliveries);
  if (retry) {
    const due = retry.at <= Date.now() ? "due now" : `around ${formatDateTime(retry.at)}`;
    const more = retry.waiting > 1 ? ` (${retry.waiting} events waiting)` : "";
    pairs.push(["Next retry", `${due}, attempt ${retry.attempt} of ${MAX_ATTEMPTS}${more}`]);
  }
  return facts(pairs);
}

export function deliveryItem(d: Delivery): HTMLLIElement {
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
      el("span", { class: "hint" }, `attempt ${d.attempt} · ${d.duration_ms} ms · ${d.outcome}`),
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
