/** The Keys view: list with status and expiry, create (optionally expiring; the full key shown once), rename, rotate, revoke. */
import { api } from "./api.ts";
import type { ApiKey, CreatedApiKey } from "./api-types.ts";
import {
  actionButton,
  askName,
  attempt,
  byId,
  chosenGrace,
  confirmAction,
  formatDateTime,
  el,
  facts,
  feedbackSlot,
  onSubmit,
  openDialog,
  say,
  showOnce,
  slotIn,
  when,
  whenRelative,
} from "./dom.ts";

const keyPath = (key: ApiKey, rest = "") => `/api-keys/${encodeURIComponent(key.id)}${rest}`;
const DAY_MS = 86_400_000;

/** Told when the list changes (the Usage view offers each key). */
let keysChanged: (keys: ApiKey[]) => void = () => {};
export function onKeysChanged(listener: (keys: ApiKey[]) => void): void {
  keysChanged = listener;
}

/** Lists the account's keys; `message` goes into the card of key `focusId`, which gets the focus. */
export async function loadKeys(focusId?: string, message?: string): Promise<void> {
  const { api_keys: keys } = await api<{ api_keys: ApiKey[] }>("GET", "/api-keys");
  keysChanged(keys);
  const list = byId("keys");
  const prefixes = new Map(keys.map((key) => [key.id, key.prefix]));
  list.replaceChildren(...(keys.length ? keys.map((key) => keyCard(key, prefixes)) : [emptyState()]));
  const card = focusId ? list.querySelector<HTMLElement>(`[data-id="${CSS.escape(focusId)}"]`) : null;
  if (card && message) say(slotIn(card), message);
  card?.querySelector<HTMLElement>("h3")?.focus();
}

function emptyState(): HTMLLIElement {
  const button = el("button", { type: "button", class: "primary" }, "Create your first key");
  button.addEventListener("click", () => void openCreate());
  return el(
    "li",
    { class: "empty-state" },
    el(
      "p",
      {},
      el("strong", {}, "No API keys yet."),
      " Create one for each server or script that calls the API, so you can revoke one without touching the others.",
    ),
    button,
  );
}

const STATUS_LABEL: Record<ApiKey["status"], string> = { active: "Active", expired: "Expired", revoked: "Revoked" };

/** `prefixes` names the keys a rotation links (a successor keeps the name, so the prefix tells them apart). */
function keyCard(key: ApiKey, prefixes: Map<string, string>): HTMLLIElement {
  const active = key.status === "active";
  const linked = (id: string) => {
    const prefix = prefixes.get(id);
    return prefix ? el("code", {}, `${prefix}…`) : id;
  };
  const details: Array<[string, Node | string]> = [
    ["Prefix", el("code", {}, `${key.prefix}…`)],
    ["Created", when(key.created_at)],
    ["Last used", when(key.last_used_at)],
  ];
  if (key.expires_at)
    details.push([
      key.status === "expired" ? "Expired" : "Expires",
      whenRelative(key.expires_at, key.status === "expired" ? "expired" : "expires"),
    ]);
  else if (active) details.push(["Expires", "Never"]);
  if (key.revoked_at) details.push(["Revoked", when(key.revoked_at)]);
  if (key.rotated_to) details.push(["Replaced by", linked(key.rotated_to)]);
  if (key.rotated_from) details.push(["Replaces", linked(key.rotated_from)]);
  const target = `key “${key.name}”`;
  const card = el("li", { class: `card key ${key.status}`, "data-id": key.id });
  const slot = feedbackSlot();
  card.append(
    el(
      "div",
      { class: "card-head" },
      el("h3", { tabindex: "-1" }, key.name),
      el("span", { class: `badge ${key.status}` }, STATUS_LABEL[key.status] ?? key.status),
    ),
    facts(details),
    el(
      "div",
      { class: "actions" },
      actionButton("Rename", target, (b) => void attempt(() => rename(key), slot, b)),
      active && !key.rotated_to && actionButton("Rotate", target, (b) => void attempt(() => rotate(key), slot, b)),
      key.status !== "revoked" && actionButton("Revoke", target, (b) => void attempt(() => revoke(key), slot, b), "danger"),
    ),
    slot,
  );
  return card;
}

/** The chosen expiry as ISO-8601, or undefined for a key that never expires. */
function chosenExpiry(form: HTMLFormElement): string | undefined {
  const data = new FormData(form);
  const choice = String(data.get("expiry") ?? "");
  if (!choice) return undefined;
  if (choice === "date") {
    const date = String(data.get("expiry_date") ?? "");
    if (!date) throw new Error("Choose the day the key expires, or pick another option.");
    return new Date(`${date}T00:00`).toISOString(); // the start of that day, local time
  }
  return new Date(Date.now() + Number(choice) * DAY_MS).toISOString();
}

function openCreate(): Promise<string> {
  const dialog = byId<HTMLDialogElement>("create-key-dialog");
  const form = byId<HTMLFormElement>("create-key");
  const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  const dateField = byId<HTMLInputElement>("key-expiry-date");
  dateField.min = isoDay(Date.now() + DAY_MS);
  dateField.max = isoDay(Date.now() + 364 * DAY_MS);
  form.hidden = false;
  byId("create-key-done").hidden = true;
  return openDialog(dialog, byId("key-name"));
}

async function create(): Promise<void> {
  const form = byId<HTMLFormElement>("create-key");
  const input = byId<HTMLInputElement>("key-name");
  const name = input.value.trim();
  if (!name) {
    input.focus();
    throw new Error("Give the key a name, so you can tell later where it is used.");
  }
  const expiresAt = chosenExpiry(form);
  const created = await api<CreatedApiKey>("POST", "/api-keys", { name, ...(expiresAt ? { expires_at: expiresAt } : {}) });
  form.hidden = true;
  byId("create-key-done").hidden = false;
  showOnce(byId("new-key"), {
    title: `Key “${created.name}” created`,
    label: "Your new API key",
    value: created.key,
    warning: "Only a fingerprint of it is stored, so nobody can show it to you again. If you lose it, revoke it and create another.",
  });
  await loadKeys();
}

async function rename(key: ApiKey): Promise<void> {
  const name = await askName(`Rename “${key.name}”`, key.name);
  if (name === undefined || name === key.name) return;
  if (!name) throw new Error("A key's name cannot be empty.");
  await api("PATCH", keyPath(key), { name });
  await loadKeys(key.id, `Renamed “${key.name}” to “${name}”.`);
}

let rotating: ApiKey | undefined;

function rotate(key: ApiKey): Promise<string> {
  rotating = key;
  const form = byId<HTMLFormElement>("rotate-form");
  form.dataset.kind = "key";
  form.reset();
  form.hidden = false;
  byId("rotate-done").hidden = true;
  byId("rotate-title").textContent = `Rotate “${key.name}”`;
  byId("rotate-text").textContent =
    `A new key replaces the one starting ${key.prefix}. Both work during the grace period, so you can deploy the new one; then the old one is refused.`;
  byId("rotate-ok").textContent = "Rotate key";
  return openDialog(byId<HTMLDialogElement>("rotate-dialog"), form.querySelector<HTMLInputElement>('input[name="grace"]:checked'));
}

/** Submitted from the rotate dialog, for a key. */
export async function finishKeyRotation(form: HTMLFormElement): Promise<void> {
  const key = rotating;
  if (!key) return;
  const grace = chosenGrace(form);
  const created = await api<CreatedApiKey>("POST", keyPath(key, "/rotate"), { grace_seconds: grace });
  form.hidden = true;
  byId("rotate-done").hidden = false;
  const ends = grace
    ? `The old key (${key.prefix}…) keeps working until ${formatDateTime(Date.now() + grace * 1000)}.`
    : `The old key (${key.prefix}…) is refused from now on.`;
  showOnce(byId("rotated"), {
    title: `“${created.name}” rotated`,
    label: "Your new API key",
    value: created.key,
    warning: `${ends} Only a fingerprint of the new one is stored.`,
  });
  await loadKeys();
}

async function revoke(key: ApiKey): Promise<void> {
  const confirmed = await confirmAction(
    `Revoke “${key.name}”?`,
    `Revocation is permanent. Every request with this key (${key.prefix}…) is refused from now on, and the key cannot be turned back on. If something still uses it, rotate it instead.`,
    "Revoke key",
  );
  if (!confirmed) return;
  await api("DELETE", keyPath(key));
  await loadKeys(key.id, `“${key.name}” is revoked; requests with it are refused.`);
}

export function setUpKeys(): void {
  const open = byId<HTMLButtonElement>("open-create-key");
  open.addEventListener("click", () => void openCreate());
  onSubmit(byId<HTMLFormElement>("create-key"), create);
  const expiry = byId<HTMLSelectElement>("key-expiry");
  expiry.addEventListener("change", () => {
    byId("key-expiry-date").hidden = expiry.value !== "date";
  });
  // The full key leaves the page with the dialog.
  byId("create-key-dialog").addEventListener("close", () => {
    byId("new-key").replaceChildren();
    byId<HTMLFormElement>("create-key").reset();
    byId("key-expiry-date").hidden = true;
  });
}
