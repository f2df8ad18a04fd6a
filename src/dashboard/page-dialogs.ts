import type { KeyScope } from "../api-keys/scopes.ts";

/** An empty slot for a message about the form or view it sits in (the browser code fills it). */
export const feedback = (id = "") => `<p class="feedback" role="status"${id ? ` id="${id}"` : ""}></p>`;

/** The scopes a key may hold (src/api-keys/scopes.ts), as the access dialog names them. */
const SCOPE_LABELS: Record<KeyScope, string> = {
  "products:read": "Products and competitors",
  "history:read": "Price history",
  "events:read": "Events feed and stream",
};

/** The grace-period choice shared by key rotation and webhook secret rotation. */
const GRACE_CHOICES = [
  ["0", "None", "the old one stops at once"],
  ["3600", "1 hour", ""],
  ["86400", "1 day", "recommended"],
  ["604800", "7 days", "the longest"],
] as const;

/** A dialog's form ends alike: its feedback slot, then Cancel (a plain button that closes the dialog) and the submit button. */
const formEnd = ({ submit, id, cancel = "Cancel" }: { submit: string; id?: string; cancel?: string }) => `${feedback()}
    <div class="actions">
      <button type="button" data-cancel>${cancel}</button>
      <button type="submit"${id ? ` id="${id}"` : ""} class="primary">${submit}</button>
    </div>`;

/**
 * Where a dialog shows a secret once (src/dashboard/browser/dialogs.ts showOnce) after its form hides, with the
 * Done button that closes it.
 */
const shownOnce = ({ slot, done }: { slot: string; done: string }) => `<div id="${slot}"></div>
  <form method="dialog" class="actions" id="${done}" hidden><button value="done" class="primary">Done</button></form>`;

/** The page's forms and confirmations, each a modal <dialog> that the browser code opens (src/dashboard/browser/dialogs.ts). */
export const DIALOGS = `<dialog id="create-key-dialog" aria-labelledby="create-key-title">
  <h2 id="create-key-title">Create an API key</h2>
  <form id="create-key">
    <div class="field">
      <label for="key-name">Name of the new key</label>
      <input id="key-name" name="name" required maxlength="100" autocomplete="off" aria-describedby="key-name-hint">
      <p id="key-name-hint" class="hint">Say where it will be used, e.g. “Production server”.</p>
    </div>
    <div class="field">
      <label for="key-expiry">Expires</label>
      <select id="key-expiry" name="expiry">
        <option value="">Never</option>
        <option value="7">In 7 days</option>
        <option value="30">In 30 days</option>
        <option value="90">In 90 days</option>
        <option value="date">On a date…</option>
      </select>
      <input id="key-expiry-date" name="expiry_date" type="date" aria-label="Expiry date" hidden>
      <p class="hint">An expired key is refused from that moment on. At most a year ahead.</p>
    </div>
    ${formEnd({ submit: "Create key" })}
  </form>
  ${shownOnce({ slot: "new-key", done: "create-key-done" })}
</dialog>

<dialog id="rotate-dialog" aria-labelledby="rotate-title" aria-describedby="rotate-text">
  <h2 id="rotate-title"></h2>
  <form id="rotate-form">
    <p id="rotate-text"></p>
    <fieldset class="field grace">
      <legend>How long the old one keeps working</legend>
      ${GRACE_CHOICES.map(([value, label, note]) => {
        const checked = value === "86400" ? " checked" : "";
        const hint = note ? ` <span class="hint">(${note})</span>` : "";
        return `<label class="check"><input type="radio" name="grace" value="${value}"${checked}> ${label}${hint}</label>`;
      }).join("\n      ")}
    </fieldset>
    ${formEnd({ submit: "", id: "rotate-ok" })}
  </form>
  ${shownOnce({ slot: "rotated", done: "rotate-done" })}
</dialog>

<dialog id="webhook-dialog" aria-labelledby="webhook-dialog-title">
  <h2 id="webhook-dialog-title">Add a webhook</h2>
  <form id="webhook-form">
    <div class="field">
      <label for="webhook-url">Endpoint URL</label>
      <input id="webhook-url" name="url" type="url" required placeholder="https://example.com/hooks/prices" autocomplete="off">
    </div>
    <fieldset class="field">
      <legend>Events</legend>
      <label class="check"><input type="checkbox" name="events" value="price.changed" checked> Price changed</label>
      <label class="check"><input type="checkbox" name="events" value="stock.changed" checked> Stock changed</label>
    </fieldset>
    <div class="field">
      <label for="webhook-min-change">Smallest price change to send, in percent</label>
      <input id="webhook-min-change" name="min_change_pct" type="number" min="0" max="1000" step="0.01" value="0" inputmode="decimal">
    </div>
    <div class="field">
      <label for="webhook-description">Description (optional)</label>
      <input id="webhook-description" name="description" maxlength="500" autocomplete="off">
    </div>
    ${formEnd({ submit: "Add webhook", id: "webhook-submit" })}
  </form>
  ${shownOnce({ slot: "new-webhook", done: "webhook-done" })}
</dialog>

<dialog id="replay-dialog" aria-labelledby="replay-title">
  <h2 id="replay-title">Replay events</h2>
  <form id="replay-form">
    <p id="replay-text" class="hint"></p>
    <div class="field">
      <label for="replay-since">From</label>
      <input id="replay-since" name="since" type="datetime-local" required>
    </div>
    <div class="field">
      <label for="replay-until">Until (optional; empty means now)</label>
      <input id="replay-until" name="until" type="datetime-local">
    </div>
    <label class="check"><input type="checkbox" name="only_failed" id="replay-only-failed"> Only events whose delivery failed</label>
    ${formEnd({ submit: "Replay events", cancel: "Close" })}
  </form>
</dialog>

<dialog id="access-dialog" aria-labelledby="access-title">
  <h2 id="access-title">Access</h2>
  <form id="access-form">
    <fieldset class="field">
      <legend>Data the key may read</legend>
      ${Object.entries(SCOPE_LABELS)
        .map(
          ([scope, label]) =>
            `<label class="check"><input type="checkbox" name="scopes" value="${scope}"> ${label} <code ` +
            `class="hint">${scope}</code></label>`,
        )
        .join("\n      ")}
      <p class="hint">A request for anything else is refused (403) and not counted.</p>
    </fieldset>
    <div class="field">
      <label for="access-ips">Allowed IP addresses (optional)</label>
      <textarea id="access-ips" name="allowed_ips" rows="4" spellcheck="false" autocomplete="off"
        aria-describedby="access-ips-hint" placeholder="203.0.113.0/24&#10;2001:db8::/32"></textarea>
      <p id="access-ips-hint" class="hint">One IPv4 or IPv6 address or CIDR range a line, at most 50. Empty: any address.
        A request from elsewhere is refused (403) and not counted.</p>
    </div>
    ${formEnd({ submit: "Save access" })}
  </form>
</dialog>

<dialog id="confirm-dialog" aria-labelledby="confirm-title" aria-describedby="confirm-text">
  <form method="dialog">
    <h2 id="confirm-title"></h2>
    <p id="confirm-text"></p>
    <div class="actions">
      <button type="button" data-cancel>Cancel</button>
      <button id="confirm-ok" value="ok" class="danger"></button>
    </div>
  </form>
</dialog>

<dialog id="rename-dialog" aria-labelledby="rename-title">
  <form method="dialog">
    <h2 id="rename-title">Rename key</h2>
    <div class="field">
      <label for="rename-input">New name</label>
      <input id="rename-input" required maxlength="100" autocomplete="off">
    </div>
    <div class="actions">
      <button type="button" data-cancel>Cancel</button>
      <button value="ok" class="primary">Save name</button>
    </div>
  </form>
</dialog>

<dialog id="deliveries-dialog" aria-labelledby="deliveries-title" class="wide">
  <h2 id="deliveries-title" tabindex="-1">Recent deliveries</h2>
  <div id="deliveries"></div>
  <form method="dialog" class="actions"><button value="close">Close</button></form>
</dialog>`;
