/** Webhooks: list, add (the signing secret shown once), delete, send a test, recent deliveries. */
import type { components } from "../../../client/schema.d.ts";
import { api, ApiFailure } from "./api.ts";
import { actionButton, announce, attempt, byId, confirmAction, dropShownOnce, el, facts, onSubmit, openDialog, showOnce, when } from "./dom.ts";

type Webhook = components["schemas"]["Webhook"];
type Delivery = components["schemas"]["Delivery"];

const EVENT_NAMES: Record<string, string> = { "price.changed": "Price changed", "stock.changed": "Stock changed" };

const webhookPath = (hook: Webhook, rest = "") => `/webhooks/${encodeURIComponent(hook.id)}${rest}`;

/** `{"webhooks": [...]}` (or a bare array). */
function listIn<T>(body: unknown, field: string): T[] {
  if (Array.isArray(body)) return body as T[];
  const value = (body as Record<string, unknown> | undefined)?.[field];
  return Array.isArray(value) ? (value as T[]) : [];
}

export async function loadWebhooks(): Promise<void> {
  const list = byId("webhooks");
  let hooks: Webhook[];
  try {
    hooks = listIn<Webhook>(await api("GET", "/webhooks"), "webhooks");
  } catch (error) {
    if (!(error instanceof ApiFailure) || error.status === 401) throw error;
    list.replaceChildren(el("li", { class: "empty" }, `Webhooks could not be loaded: ${error.message}`));
    return;
  }
  list.replaceChildren(...(hooks.length ? hooks.map(webhookCard) : [el("li", { class: "empty" }, "No webhooks yet.")]));
}

function webhookCard(hook: Webhook): HTMLLIElement {
  const details: Array<[string, Node | string]> = [
    ["Events", (hook.events ?? []).map((type) => EVENT_NAMES[type] ?? type).join(", ") || "All"],
    ["Status", el("span", { class: `badge ${hook.status ?? ""}` }, hook.status === "disabled" ? "Disabled" : "Enabled")],
    ["Smallest change", `${hook.min_change_pct ?? 0} %`],
    ["Created", when(hook.created_at, "—")],
  ];
  if (hook.description) details.unshift(["Description", hook.description]);
  if (hook.disabled_reason) details.push(["Disabled because", hook.disabled_reason]);
  const target = `webhook ${hook.url}`;
  return el(
    "li",
    { class: "card", "data-id": hook.id },
    el("h3", { tabindex: "-1", class: "url" }, hook.url),
    facts(details),
    el(
      "div",
      { class: "actions" },
      actionButton("Send test", target, () => void attempt(() => sendTest(hook))),
      actionButton("Deliveries", target, () => void attempt(() => showDeliveries(hook))),
      actionButton("Delete", target, () => void attempt(() => remove(hook)), "danger"),
    ),
  );
}

async function create(form: HTMLFormElement): Promise<void> {
  const data = new FormData(form);
  const description = String(data.get("description") ?? "").trim();
  const body = {
    url: String(data.get("url") ?? "").trim(),
    events: data.getAll("events").map(String),
    min_change_pct: Number(data.get("min_change_pct") || 0),
    ...(description ? { description } : {}),
  };
  const created = await api<Webhook & { secret: string }>("POST", "/webhooks", body);
  form.reset();
  showOnce(byId("new-webhook"), {
    owner: created.id,
    title: `Webhook for ${created.url} added`,
    label: "Signing secret",
    value: created.secret,
    warning: "Your receiver needs it to check each delivery's webhook-signature header. If you lose it, delete the webhook and add it again.",
  });
  await loadWebhooks();
}

async function sendTest(hook: Webhook): Promise<void> {
  await api("POST", webhookPath(hook, "/test"));
  announce(`A webhook.test event is on its way to ${hook.url}; its delivery shows under Deliveries in a few seconds.`);
}

async function showDeliveries(hook: Webhook): Promise<void> {
  const deliveries = listIn<Delivery>(await api("GET", webhookPath(hook, "/deliveries")), "deliveries");
  const items = deliveries.map((d) =>
    el(
      "li",
      { class: "card" },
      facts([
        ["Event", `${d.type} (${d.event_id})`],
        ["Attempt", String(d.attempt)],
        ["Result", d.status_code === null ? "No response" : `HTTP ${d.status_code}`],
        ...(d.outcome ? ([["Outcome", d.outcome]] as Array<[string, string]>) : []),
        ...(d.error ? ([["Error", d.error]] as Array<[string, string]>) : []),
        ["Took", d.duration_ms === null ? "—" : `${d.duration_ms} ms`],
        ["At", when(d.delivered_at)],
      ]),
    ),
  );
  byId("deliveries-title").textContent = `Recent deliveries to ${hook.url}`;
  byId("deliveries").replaceChildren(
    items.length ? el("ul", { class: "cards" }, ...items) : el("p", {}, "No deliveries yet. Send a test to see one here."),
  );
  await openDialog(byId<HTMLDialogElement>("deliveries-dialog"), byId("deliveries-dialog").querySelector("button") ?? undefined);
}

async function remove(hook: Webhook): Promise<void> {
  const confirmed = await confirmAction(
    "Delete this webhook?",
    `${hook.url} will receive no more events, and its delivery history goes with it. This cannot be undone.`,
    "Delete webhook",
  );
  if (!confirmed) return;
  await api("DELETE", webhookPath(hook));
  dropShownOnce(byId("new-webhook"), hook.id);
  announce(`The webhook for ${hook.url} is deleted.`);
  await loadWebhooks();
  byId("webhooks-title").focus();
}

export function setUpWebhooks(): void {
  const form = byId<HTMLFormElement>("create-webhook");
  onSubmit(form, () => create(form));
}
