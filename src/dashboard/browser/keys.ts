/**
 * The Keys view: a table (stacked rows on a phone) with status, rotation links and expiry, active keys
 * first and revoked ones behind a filter; a banner for each key found in public; create (optionally
 * expiring; the full key shown once), rename, edit access (scopes, allowed IPs), rotate, revoke.
 */

import { KEY_SCOPES } from "../../api-keys/scopes.ts";
import { DAY_MS } from "../../platform/time.ts";
import { api } from "./api.ts";
import type { ApiKey, CreatedApiKey } from "./api-types.ts";
import { askName, chosenGrace, confirmAction, openDialog, openRotateDialog, showOnce } from "./dialogs.ts";
import {
  actionButton,
  attempt,
  byId,
  el,
  feedbackSlot,
  formatDateTime,
  moreMenu,
  onSubmit,
  say,
  slotIn,
  when,
  whenRelative,
} from "./dom.ts";
import { environment, ofShownEnvironment, onEnvironmentChanged, TEST_KEY_PREFIX } from "./environment.ts";
import { listEntries } from "./form-fields.ts";
import { replacesWords } from "./key-lineage.ts";
import { holdTestKey } from "./send-change.ts";

type Scope = ApiKey["scopes"][number];
/** The scope only a test key can use (POST /test/observations): neither shown nor offered for a live key. */
const TEST_KEYS_ONLY: Scope = "sandbox:write";

const keyPath = (key: ApiKey, rest = "") => `/api-keys/${encodeURIComponent(key.id)}${rest}`;

/** Told when the list changes (the Usage view offers each key). */
let keysChanged: (keys: ApiKey[]) => void = () => {};
export function onKeysChanged(listener: (keys: ApiKey[]) => void): void {
  keysChanged = listener;
}

/** The last list, and whether revoked keys are shown (they sit behind "Show revoked (N)"). */
let listed: ApiKey[] = [];
let showRevoked = false;

/** Lists the account's keys; `message` goes into the row of key `focusId`, which gets the focus. */
export async function loadKeys(focusId?: string, message?: string): Promise<void> {
  const { api_keys: keys } = await api<{ api_keys: ApiKey[] }>("GET", "/api-keys");
  listed = keys;
  render();
  const row = focusId ? byId("keys").querySelector<HTMLElement>(`[data-id="${CSS.escape(focusId)}"]`) : null;
  if (row) {
    if (message) say(slotIn(row), message);
    row.querySelector<HTMLElement>(".key-name")?.focus();
  } else if (focusId) {
    // The key left the list (revoked, behind the filter): the message goes above it.
    if (message) say(byId("keys-feedback"), message);
    byId("keys-title").focus();
  }
}

/** Active keys first, then expired, then revoked; newest first within each (the API lists newest first). */
const STATUS_ORDER: Record<ApiKey["status"], number> = { active: 0, expired: 1, revoked: 2 };

/** The keys of the environment shown (environment.ts), whose list tells the Usage view. */
function render(): void {
  const mine = ofShownEnvironment(listed);
  keysChanged(mine);
  const revoked = mine.filter((key) => key.status === "revoked");
  const shown = mine
    .filter((key) => showRevoked || key.status !== "revoked")
    .sort((a, b) => STATUS_ORDER[a.status] - STATUS_ORDER[b.status]);
  const prefixes = new Map(listed.map((key) => [key.id, key]));
  byId("keys").replaceChildren(...(shown.length ? shown.map((key) => keyRow(key, prefixes)) : [emptyState(revoked.length)]));
  const toggle = byId<HTMLButtonElement>("show-revoked");
  toggle.hidden = !revoked.length;
  toggle.setAttribute("aria-pressed", String(showRevoked));
  toggle.textContent = `${showRevoked ? "Hide" : "Show"} revoked (${revoked.length})`;
  byId("leaks").replaceChildren(...mine.filter(recentlyLeaked).map(leakBanner));
}

/** A leaked key's banner stays for 30 days after the report. */
const recentlyLeaked = (key: ApiKey) =>
  key.revoked_reason === "leaked" && Date.now() - Date.parse(key.leaked_at ?? key.revoked_at ?? "") < 30 * DAY_MS;

/** Where a leaked key was found: a link when the report gave a web address, else the text as reported. */
function leakPlace(url: string | null): Node | string {
  if (!url) return "a public place the scanner did not name";
  return /^https?:\/\//i.test(url) && URL.canParse(url) ? el("a", { href: url, rel: "noopener noreferrer", target: "_blank" }, url) : url;
}

function leakBanner(key: ApiKey): HTMLElement {
  return el(
    "div",
    { class: "leak", role: "alert" },
    el("strong", {}, `“${key.name}” (${key.prefix}…) was found in public and revoked. `),
    "Found at ",
    leakPlace(key.leak_url),
    key.leaked_at ? el("span", {}, ", reported ", when(key.leaked_at)) : null,
    ". Requests with it are refused. Remove it from there, then create a new key for what used it, and keep the new " +
      "one out of code you publish.",
  );
}

function emptyState(revoked: number): HTMLTableRowElement {
  const test = environment() === "test";
  const button = el(
    "button",
    { type: "button", class: "primary" },
    revoked ? "Create a key" : `Create your first ${test ? "test " : ""}key`,
  );
  button.addEventListener("click", () => void openCreate());
  const text = revoked
    ? [
        el("strong", {}, "No active keys."),
        ` Your ${revoked === 1 ? "revoked key is" : `${revoked} revoked keys are`} under “Show revoked”.`,
      ]
    : test
      ? [
          el("strong", {}, "No test keys yet."),
          " A test key (pda_test_…) reads your sandbox only, with the standard plan's limits: build and try your " +
            "integration with it, then send price changes to see your test webhooks fire.",
        ]
      : [
          el("strong", {}, "No API keys yet."),
          " Create one for each server or script that calls the API, so you can revoke one without touching the others.",
        ];
  return el("tr", {}, el("td", { colspan: "7" }, el("div", { class: "empty-state" }, el("p", {}, ...text), button)));
}

const STATUS_LABEL: Record<ApiKey["status"], string> = { active: "Active", expired: "Expired", revoked: "Revoked" };

/** What the key may do: "All data" or its scopes, and where from. */
function accessSummary(key: ApiKey): string {
  const meaningful = (scopes: readonly Scope[]) => scopes.filter((scope) => key.environment === "test" || scope !== TEST_KEYS_ONLY);
  const held = meaningful(key.scopes);
  const scopes = held.length === meaningful(KEY_SCOPES).length ? "All data" : held.join(", ");
  const ips = key.allowed_ips?.length;
  return `${scopes} · ${ips ? `${ips} IP range${ips === 1 ? "" : "s"}` : "any IP"}`;
}

/** `byKeyId` finds the keys a rotation links (a successor keeps the name, so the prefix tells them apart). */
function keyRow(key: ApiKey, byKeyId: Map<string, ApiKey>): HTMLTableRowElement {
  const active = key.status === "active";
  const prefixOf = (id: string) => el("code", {}, byKeyId.get(id) ? `${byKeyId.get(id)!.prefix}…` : id);
  const target = `key “${key.name}”`;
  const slot = feedbackSlot();
  // A rotated key's expiry is the end of its grace: said so, since that is why it has one.
  const expiryWord = key.status === "expired" ? "expired" : key.rotated_to ? "grace ends" : "expires";
  const expires = key.expires_at ? whenRelative(key.expires_at, expiryWord) : active ? "Never" : "—";
  const predecessorWords = key.rotated_from ? replacesWords(byKeyId.get(key.rotated_from)) : undefined;
  const lineage = [
    key.rotated_from && predecessorWords && el("p", { class: "lineage" }, predecessorWords, prefixOf(key.rotated_from)),
    key.rotated_to && el("p", { class: "lineage" }, "Replaced by ", prefixOf(key.rotated_to)),
    key.revoked_reason === "leaked" && el("p", { class: "lineage leaked" }, "Found in public: revoked"),
    key.kind === "connector" && el("p", { class: "lineage" }, "Connector: an AI client connected by OAuth; revoke to disconnect it"),
  ];
  const cell = (label: string, ...children: Array<Node | string | false | null>) => el("td", { "data-label": label }, ...children);
  return el(
    "tr",
    { class: `key ${key.status}`, "data-id": key.id },
    el(
      "th",
      { scope: "row" },
      el("span", { class: "key-name", tabindex: "-1" }, key.name),
      " ",
      el("span", { class: `badge ${key.status}` }, STATUS_LABEL[key.status] ?? key.status),
      ...lineage,
    ),
    cell("Key", el("code", { class: "prefix" }, `${key.prefix}…`)),
    cell("Created", when(key.created_at)),
    cell("Last used", key.last_used_at ? whenRelative(key.last_used_at) : "Never"),
    cell(key.status === "expired" ? "Expired" : "Expires", expires),
    cell("Access", accessSummary(key)),
    el(
      "td",
      { class: "row-actions" },
      el(
        "div",
        { class: "actions" },
        active &&
          !key.rotated_to &&
          key.kind !== "connector" &&
          actionButton("Rotate", target, (b) => void attempt(() => rotate(key), slot, b)),
        key.status !== "revoked" && actionButton("Revoke", target, (b) => void attempt(() => revoke(key), slot, b), "danger"),
        moreMenu(
          target,
          actionButton("Rename", target, (b) => void attempt(() => rename(key), slot, b)),
          active && actionButton("Edit access", target, (b) => void attempt(() => editAccess(key), slot, b)),
        ),
      ),
      slot,
    ),
  );
}

/** The chosen expiry as ISO-8601, or undefined for a key that never expires. */
function chosenExpiry(form: HTMLFormElement): string | undefined {
  const data = new FormData(form);
  const choice = String(data.get("expires_at") ?? "");
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
  byId("create-key-title").textContent = environment() === "test" ? "Create a test key" : "Create an API key";
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
  const body = { name, environment: environment(), ...(expiresAt ? { expires_at: expiresAt } : {}) };
  const created = await api<CreatedApiKey>("POST", "/api-keys", body);
  holdTestKey(created);
  form.hidden = true;
  byId("create-key-done").hidden = false;
  showOnce(byId("new-key"), {
    title: `Key “${created.name}” created`,
    label: "Your new API key",
    value: created.key,
    warning:
      "Only a fingerprint of it is stored, so nobody can show it to you again. If you lose it, revoke it and create another." +
      (created.key.startsWith(TEST_KEY_PREFIX) ? " Until you leave or reload this page, “Send a price change” can use it." : ""),
  });
  await loadKeys();
}

async function rename(key: ApiKey): Promise<void> {
  const name = await askName({ title: `Rename “${key.name}”`, current: key.name });
  if (name === undefined || name === key.name) return;
  if (!name) throw new Error("A key's name cannot be empty.");
  await api("PATCH", keyPath(key), { name });
  await loadKeys(key.id, `Renamed “${key.name}” to “${name}”.`);
}

let rotating: ApiKey | undefined;

function rotate(key: ApiKey): Promise<string> {
  rotating = key;
  return openRotateDialog("key", {
    title: `Rotate “${key.name}”`,
    text:
      `A new key replaces the one starting ${key.prefix}. Both work during the grace period, so you can deploy the new ` +
      `one; then the old one is refused.`,
    ok: "Rotate key",
  });
}

/** Submitted from the rotate dialog, for a key. */
export async function finishKeyRotation(form: HTMLFormElement): Promise<void> {
  const key = rotating;
  if (!key) return;
  const grace = chosenGrace(form);
  const created = await api<CreatedApiKey>("POST", keyPath(key, "/rotate"), { grace_seconds: grace });
  holdTestKey(created); // a test key's successor is one "Send a price change" can use
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

/**
 * What revoking `key` does to the key it replaced, when that one is still in its grace: it keeps working
 * until the grace ends, and the API refuses to rotate it again (it already was: 409), so the way on is a new key.
 */
function replacedKeyNote(key: ApiKey): string {
  const old = key.rotated_from ? listed.find((other) => other.id === key.rotated_from) : undefined;
  if (old?.status !== "active" || !old.expires_at) return "";
  return (
    ` The key it replaced (${old.prefix}…) is not affected: it keeps working until ${formatDateTime(old.expires_at)}, then is refused.` +
    " It cannot be rotated again (it already was), so if something still needs a key, create a new one before then."
  );
}

async function revoke(key: ApiKey): Promise<void> {
  const confirmed = await confirmAction({
    title: `Revoke “${key.name}”?`,
    text:
      `Revocation is permanent. Every request with this key (${key.prefix}…) is refused from now on, and the key ` +
      `cannot be turned back on. If something still uses it, rotate it instead.${replacedKeyNote(key)}`,
    confirm: "Revoke key",
  });
  if (!confirmed) return;
  await api("DELETE", keyPath(key));
  await loadKeys(key.id, `“${key.name}” is revoked; requests with it are refused. It is listed under “Show revoked”.`);
}

let editingAccess: ApiKey | undefined;

/** Opens the access dialog: the scopes as checkboxes, the allowed addresses one a line. */
function editAccess(key: ApiKey): Promise<string> {
  editingAccess = key;
  const form = byId<HTMLFormElement>("access-form");
  form.reset();
  byId("access-title").textContent = `Access of “${key.name}”`;
  for (const box of form.querySelectorAll<HTMLInputElement>('input[name="scopes"]')) {
    box.checked = key.scopes.includes(box.value as Scope);
    // Offered for a test key only; a live key keeps it as it is (the hidden box is still sent).
    if (box.value === TEST_KEYS_ONLY) box.closest("label")!.hidden = key.environment !== "test";
  }
  byId<HTMLTextAreaElement>("access-ips").value = (key.allowed_ips ?? []).join("\n");
  return openDialog(byId<HTMLDialogElement>("access-dialog"), form.querySelector<HTMLInputElement>('input[name="scopes"]'));
}

async function saveAccess(form: HTMLFormElement): Promise<void> {
  const key = editingAccess;
  if (!key) return;
  const data = new FormData(form);
  const scopes = data.getAll("scopes").map(String) as Scope[];
  if (!scopes.length) throw new Error("Choose at least one kind of data the key may read.");
  const ips = listEntries(byId<HTMLTextAreaElement>("access-ips")).map((entry) => entry.value);
  await api<ApiKey>("PATCH", keyPath(key), { scopes, allowed_ips: ips.length ? ips : null });
  byId<HTMLDialogElement>("access-dialog").close("saved");
  await loadKeys(key.id, `Access of “${key.name}” saved; it applies from the next request.`);
}

export function setUpKeys(): void {
  onEnvironmentChanged(render);
  byId("show-revoked").addEventListener("click", () => {
    showRevoked = !showRevoked;
    render();
  });
  const accessForm = byId<HTMLFormElement>("access-form");
  onSubmit(accessForm, () => saveAccess(accessForm));
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
