/** The API Keys area: list, create (the full key shown once), rename, revoke. */
import type { components } from "../../../client/schema.d.ts";
import { api } from "./api.ts";
import { actionButton, announce, askName, attempt, byId, confirmAction, dropShownOnce, el, facts, onSubmit, showError, showOnce, when } from "./dom.ts";

type ApiKey = components["schemas"]["ApiKey"];

const keyPath = (key: ApiKey) => `/api-keys/${encodeURIComponent(key.id)}`;

/** Lists the account's keys; `focusId` puts the focus back on a card that was just changed. */
export async function loadKeys(focusId?: string): Promise<void> {
  const { api_keys: keys } = await api<{ api_keys: ApiKey[] }>("GET", "/api-keys");
  const list = byId("keys");
  list.replaceChildren(...(keys.length ? keys.map(keyCard) : [el("li", { class: "empty" }, "No keys yet: create one above.")]));
  if (focusId) list.querySelector<HTMLElement>(`[data-id="${CSS.escape(focusId)}"] h3`)?.focus();
}

function keyCard(key: ApiKey): HTMLLIElement {
  const active = key.status === "active";
  const details: Array<[string, Node | string]> = [
    ["Prefix", el("code", {}, `${key.prefix}…`)],
    ["Status", el("span", { class: `badge ${key.status}` }, active ? "Active" : "Revoked")],
    ["Created", when(key.created_at)],
    ["Last used", when(key.last_used_at)],
  ];
  if (key.revoked_at) details.push(["Revoked", when(key.revoked_at)]);
  return el(
    "li",
    { class: "card", "data-id": key.id },
    el("h3", { tabindex: "-1" }, key.name),
    facts(details),
    el(
      "div",
      { class: "actions" },
      actionButton("Rename", `key “${key.name}”`, () => void attempt(() => rename(key))),
      active && actionButton("Revoke", `key “${key.name}”`, () => void attempt(() => revoke(key)), "danger"),
    ),
  );
}

async function create(): Promise<void> {
  const input = byId<HTMLInputElement>("key-name");
  const name = input.value.trim();
  if (!name) {
    showError("Give the key a name, so you can tell later where it is used.");
    input.focus();
    return;
  }
  const created = await api<ApiKey & { key: string }>("POST", "/api-keys", { name });
  input.value = "";
  showOnce(byId("new-key"), {
    owner: created.id,
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
  if (!name) return showError("A key's name cannot be empty.");
  await api("PATCH", keyPath(key), { name });
  announce(`Renamed “${key.name}” to “${name}”.`);
  await loadKeys(key.id);
}

async function revoke(key: ApiKey): Promise<void> {
  const confirmed = await confirmAction(
    `Revoke “${key.name}”?`,
    `Revocation is permanent. Every request with this key (${key.prefix}…) is refused from now on, and the key cannot be turned back on. If something still uses it, create its replacement first.`,
    "Revoke key",
  );
  if (!confirmed) return;
  await api("DELETE", keyPath(key));
  dropShownOnce(byId("new-key"), key.id);
  announce(`“${key.name}” is revoked; requests with it are refused.`);
  await loadKeys(key.id);
}

export function setUpKeys(): void {
  onSubmit(byId<HTMLFormElement>("create-key"), create);
}
