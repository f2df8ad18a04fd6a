/**
 * The Webhooks view: list, add and edit (in one dialog; the signing secret shown once on adding),
 * disable/enable, rotate the secret, replay events since a time, send a test, deliveries, delete.
 */
import type { components } from "../../../client/schema.d.ts";
import { fillRules, readRules, rulesSummary } from "./alert-rules.ts";
import { api } from "./api.ts";
import type { Delivery, ReplayQueued, RotatedWebhookSecret, WebhookPatch } from "./api-types.ts";
import { deliveryItem, healthFacts } from "./delivery-view.ts";
import { chosenGrace, confirmAction, openDialog, openRotateDialog, showOnce } from "./dialogs.ts";
import { actionButton, attempt, byId, el, facts, feedbackSlot, formatDateTime, moreMenu, onSubmit, say, slotIn, when } from "./dom.ts";
import { type Environment, environment, ofShownEnvironment, onEnvironmentChanged } from "./environment.ts";

type Webhook = components["schemas"]["Webhook"];
type CreatedWebhook = components["schemas"]["CreatedWebhook"];

const EVENT_NAMES: Record<string, string> = { "price.changed": "Price changed", "stock.changed": "Stock changed" };
const REPLAY_WINDOW_MS = 30 * 86_400_000; // events are kept 30 days

const webhookPath = (hook: Webhook, rest = "") => `/webhooks/${encodeURIComponent(hook.id)}${rest}`;

/** The account's webhooks, of both environments, as last listed. */
let listed: Webhook[] = [];

/** A webhook's environment, by its id (one no longer listed, i.e. deleted: live). */
export const webhookEnvironment = (id: string): Environment => listed.find((hook) => hook.id === id)?.environment ?? "live";

/** Draws the webhooks of the environment shown (environment.ts). */
function render(): void {
  const hooks = ofShownEnvironment(listed);
  byId("webhooks").replaceChildren(...(hooks.length ? hooks.map(webhookCard) : [emptyState()]));
  // Each card's health comes from its latest deliveries, after the list shows (a failure stays in that card).
  for (const hook of hooks) void showHealth(hook);
}

/** Lists the webhooks; `message` goes into the card of webhook `focusId`, which gets the focus. */
export async function loadWebhooks(focusId?: string, message?: string): Promise<void> {
  const list = byId("webhooks");
  listed = (await api<{ webhooks: Webhook[] }>("GET", "/webhooks")).webhooks;
  render();
  const card = focusId ? list.querySelector<HTMLElement>(`[data-id="${CSS.escape(focusId)}"]`) : null;
  if (card && message) say(slotIn(card), message);
  card?.querySelector<HTMLElement>("h3")?.focus();
}

function emptyState(): HTMLLIElement {
  const test = environment() === "test";
  const button = el("button", { type: "button", class: "primary" }, `Add your first ${test ? "test " : ""}webhook`);
  button.addEventListener("click", () => void openEditor());
  const text = test
    ? " A test webhook receives your sandbox's events only: add your endpoint (a local one will do, e.g. from " +
      "npm run webhook:listen), then “Send a price change” to see it fire."
    : " Add your endpoint's URL and we POST each price or stock change to it, signed, within seconds. Until then you " +
      "can poll the events feed.";
  return el(
    "li",
    { class: "empty-state" },
    el("p", {}, el("strong", {}, test ? "No test webhooks yet." : "No webhooks yet."), text),
    button,
  );
}

function webhookCard(hook: Webhook): HTMLLIElement {
  const enabled = hook.status !== "disabled";
  const details: Array<[string, Node | string]> = [
    ["Events", hook.events.map((type) => EVENT_NAMES[type] ?? type).join(", ") || "All"],
    ["Smallest change", `${hook.min_change_pct} %`],
    ["Created", when(hook.created_at, "—")],
  ];
  if (hook.description) details.unshift(["Description", hook.description]);
  if (hook.disabled_at) details.push(["Disabled", when(hook.disabled_at)]);
  const target = `webhook ${hook.url}`;
  const slot = feedbackSlot();
  const run = (action: () => Promise<unknown>) => (button: HTMLButtonElement) => void attempt(action, slot, button);
  const more = moreMenu(
    target,
    actionButton(
      "Rotate secret",
      target,
      run(() => rotateSecret(hook)),
    ),
    actionButton(
      "Replay events",
      target,
      run(() => openReplay(hook)),
    ),
    actionButton(
      "Delete",
      target,
      run(() => remove(hook)),
      "danger",
    ),
  );
  return el(
    "li",
    { class: `card webhook ${hook.status}`, "data-id": hook.id },
    el(
      "div",
      { class: "card-head" },
      el("h3", { tabindex: "-1", class: "url" }, hook.url),
      el("span", { class: `badge ${hook.status}` }, enabled ? "Enabled" : "Disabled"),
    ),
    hook.disabled_reason ? el("p", { class: "reason" }, el("strong", {}, "Disabled because: "), hook.disabled_reason) : null,
    facts(details),
    rulesSummary(hook),
    el("div", { class: "health", "aria-live": "polite" }, el("p", { class: "hint" }, "Checking recent deliveries…")),
    el(
      "div",
      { class: "actions" },
      actionButton(
        "Send test",
        target,
        run(() => sendTest(hook)),
      ),
      actionButton(
        "Deliveries",
        target,
        run(() => showDeliveries(hook)),
      ),
      actionButton(
        "Edit",
        target,
        run(() => openEditor(hook)),
      ),
      actionButton(
        enabled ? "Disable" : "Enable",
        target,
        run(() => setStatus(hook, enabled ? "disabled" : "enabled")),
      ),
      more,
    ),
    slot,
  );
}

/** The webhook being edited; undefined while adding one. */
let editing: Webhook | undefined;

function openEditor(hook?: Webhook): Promise<string> {
  editing = hook;
  const form = byId<HTMLFormElement>("webhook-form");
  form.reset();
  form.hidden = false;
  byId("webhook-done").hidden = true;
  byId("webhook-dialog-title").textContent = hook ? "Edit webhook" : environment() === "test" ? "Add a test webhook" : "Add a webhook";
  byId("webhook-submit").textContent = hook ? "Save changes" : "Add webhook";
  if (hook) {
    byId<HTMLInputElement>("webhook-url").value = hook.url;
    for (const box of form.querySelectorAll<HTMLInputElement>('input[name="events"]'))
      box.checked = hook.events.includes(box.value as Webhook["events"][number]);
    byId<HTMLInputElement>("webhook-min-change").value = String(hook.min_change_pct);
    byId<HTMLInputElement>("webhook-description").value = hook.description ?? "";
  }
  fillRules(form, hook?.filters ?? null);
  return openDialog(byId<HTMLDialogElement>("webhook-dialog"), byId("webhook-url"));
}

function formFields(form: HTMLFormElement) {
  const data = new FormData(form);
  const events = data.getAll("events").map(String) as Webhook["events"];
  if (!events.length) throw new Error("Choose at least one event to send.");
  const typed = String(data.get("url") ?? "").trim();
  return {
    // The API takes RFC 3986 URLs only: the browser's parser punycodes an internationalised host and percent-encodes the rest.
    url: URL.canParse(typed) ? new URL(typed).href : typed,
    events,
    min_change_pct: Number(data.get("min_change_pct") || 0),
    description: String(data.get("description") ?? "").trim(),
    filters: readRules(form, editing?.filters),
  };
}

async function save(form: HTMLFormElement): Promise<void> {
  const fields = formFields(form);
  if (editing) {
    const hook = editing;
    const patch: WebhookPatch = fields;
    await api<Webhook>("PATCH", webhookPath(hook), patch);
    byId<HTMLDialogElement>("webhook-dialog").close("saved");
    await loadWebhooks(hook.id, "Changes saved.");
    return;
  }
  const { description, filters, ...rest } = fields;
  const created = await api<CreatedWebhook>("POST", "/webhooks", {
    ...rest,
    environment: environment(),
    ...(description ? { description } : {}),
    ...(filters ? { filters } : {}),
  });
  form.hidden = true;
  byId("webhook-done").hidden = false;
  showOnce(byId("new-webhook"), {
    title: `Webhook for ${created.url} added`,
    label: "Signing secret",
    value: created.secret,
    warning: "Your receiver needs it to check each delivery's webhook-signature header. If you lose it, rotate the secret.",
  });
  await loadWebhooks();
}

async function setStatus(hook: Webhook, status: "enabled" | "disabled"): Promise<void> {
  const patch: WebhookPatch = { status };
  await api<Webhook>("PATCH", webhookPath(hook), patch);
  await loadWebhooks(
    hook.id,
    status === "enabled"
      ? "Enabled: new events are sent again. Replay the ones it missed if needed."
      : "Disabled: no events are sent until you enable it again.",
  );
}

let rotatingHook: Webhook | undefined;

function rotateSecret(hook: Webhook): Promise<string> {
  rotatingHook = hook;
  return openRotateDialog("webhook", {
    title: "Rotate the signing secret",
    text:
      `A new secret signs deliveries to ${hook.url}. During the grace period each delivery carries both signatures, so ` +
      `your receiver can switch without missing one.`,
    ok: "Rotate secret",
  });
}

/** Submitted from the rotate dialog, for a webhook's secret. */
export async function finishSecretRotation(form: HTMLFormElement): Promise<void> {
  const hook = rotatingHook;
  if (!hook) return;
  const grace = chosenGrace(form);
  const rotated = await api<RotatedWebhookSecret>("POST", webhookPath(hook, "/rotate-secret"), { grace_seconds: grace });
  form.hidden = true;
  byId("rotate-done").hidden = false;
  showOnce(byId("rotated"), {
    title: "New signing secret",
    label: "Signing secret",
    value: rotated.secret,
    warning: grace
      ? `Deliveries carry the old signature too until ${formatDateTime(Date.now() + grace * 1000)}; ` +
        "give your receiver the new secret before then."
      : "Deliveries are signed with this secret only, from now on.",
  });
}

let replaying: Webhook | undefined;

/** A datetime-local value (local time, minutes) for an instant. */
const localInput = (ms: number) => {
  const date = new Date(ms - new Date(ms).getTimezoneOffset() * 60_000);
  return date.toISOString().slice(0, 16);
};

function openReplay(hook: Webhook): Promise<string> {
  replaying = hook;
  const form = byId<HTMLFormElement>("replay-form");
  form.reset();
  const now = Date.now();
  const since = byId<HTMLInputElement>("replay-since");
  since.value = localInput(now - 86_400_000);
  since.min = localInput(now - REPLAY_WINDOW_MS + 60_000);
  since.max = localInput(now);
  byId<HTMLInputElement>("replay-until").max = localInput(now);
  byId("replay-text").textContent =
    `Sends the events of the last 30 days again to ${hook.url}, with their original ids, so a receiver that deduplicates sees none twice.`;
  return openDialog(byId<HTMLDialogElement>("replay-dialog"), since);
}

async function replay(form: HTMLFormElement): Promise<void> {
  const hook = replaying;
  if (!hook) return;
  const data = new FormData(form);
  const iso = (field: string) => {
    const value = String(data.get(field) ?? "");
    return value ? new Date(value).toISOString() : undefined;
  };
  const until = iso("until");
  const body = { since: iso("since"), ...(until ? { until } : {}), ...(data.get("only_failed") ? { only_failed: true } : {}) };
  const { queued, held_back, budget, refills_at } = await api<ReplayQueued>("POST", webhookPath(hook, "/replay"), body);
  // Past the account's replay budget the newest are held back: say so, and when the same replay would fit.
  const heldBack = held_back
    ? ` ${held_back.toLocaleString()} more held back (${budget} per account); replay them after ${new Date(refills_at!).toLocaleTimeString()}.`
    : "";
  say(
    slotIn(form),
    queued
      ? `Queued ${queued.toLocaleString()} event${queued === 1 ? "" : "s"} for ${hook.url}. They show under Deliveries as they go out.${heldBack}`
      : held_back
        ? `Queued 0 events.${heldBack}`
        : "Queued 0 events: none matched that period.",
  );
}

async function sendTest(hook: Webhook): Promise<void> {
  await api("POST", webhookPath(hook, "/test"));
  const card = byId("webhooks").querySelector(`[data-id="${CSS.escape(hook.id)}"]`);
  if (card) say(slotIn(card), "A webhook.test event is on its way; its delivery shows under Deliveries in a few seconds.");
}

const deliveriesOf = async (hook: Webhook) => (await api<{ deliveries: Delivery[] }>("GET", webhookPath(hook, "/deliveries"))).deliveries;

/** The card's health, from `known` deliveries (just read for the dialog) or read now. */
async function showHealth(hook: Webhook, known?: Delivery[]): Promise<void> {
  const slot = byId("webhooks").querySelector(`[data-id="${CSS.escape(hook.id)}"] .health`);
  if (!slot) return;
  try {
    slot.replaceChildren(healthFacts(known ?? (await deliveriesOf(hook)), hook.status === "disabled"));
  } catch (error) {
    slot.replaceChildren(
      el("p", { class: "hint" }, `Recent deliveries could not be checked: ${error instanceof Error ? error.message : String(error)}`),
    );
  }
}

async function showDeliveries(hook: Webhook): Promise<void> {
  const deliveries = await deliveriesOf(hook);
  void showHealth(hook, deliveries); // the card catches up with what the dialog shows (a delivery since the list was drawn)
  const title = byId("deliveries-title");
  title.textContent = `Recent deliveries to ${hook.url}`;
  byId("deliveries").replaceChildren(
    deliveries.length
      ? el("ul", { class: "deliveries" }, ...deliveries.map((d) => deliveryItem(d, hook.status === "disabled")))
      : el(
          "p",
          { class: "empty-state" },
          `No deliveries yet. Use “Send test” on the webhook${environment() === "test" ? " or “Send a price change”" : ""} to see one here.`,
        ),
  );
  // The focus goes to the title, at the top, where the newest attempt is (the Close button at the
  // bottom would scroll a phone's screen past all of them).
  const dialog = byId<HTMLDialogElement>("deliveries-dialog");
  const closed = openDialog(dialog, title);
  dialog.scrollTop = 0;
  await closed;
}

async function remove(hook: Webhook): Promise<void> {
  const confirmed = await confirmAction({
    title: "Delete this webhook?",
    text:
      `${hook.url} will receive no more events, and its delivery history goes with it. This cannot be undone; to pause ` +
      "it, disable it instead.",
    confirm: "Delete webhook",
  });
  if (!confirmed) return;
  await api("DELETE", webhookPath(hook));
  await loadWebhooks();
  say(byId("webhooks-feedback"), `The webhook for ${hook.url} is deleted.`);
  byId("webhooks-title").focus();
}

export function setUpWebhooks(): void {
  onEnvironmentChanged(render);
  byId("open-add-webhook").addEventListener("click", () => void openEditor());
  const form = byId<HTMLFormElement>("webhook-form");
  onSubmit(form, () => save(form));
  const replayForm = byId<HTMLFormElement>("replay-form");
  onSubmit(replayForm, () => replay(replayForm));
  // The secret leaves the page with the dialog.
  byId("webhook-dialog").addEventListener("close", () => byId("new-webhook").replaceChildren());
}
