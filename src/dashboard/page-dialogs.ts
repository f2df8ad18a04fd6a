import type { KeyScope } from "../api-keys/scopes.ts";
import { CURRENCY_CODES } from "../platform/money.ts";

/** An empty slot for a message about the form or view it sits in (the browser code fills it). */
export const feedback = (id = "") => `<p class="feedback" role="status"${id ? ` id="${id}"` : ""}></p>`;

/** The scopes a key may hold (src/api-keys/scopes.ts), as the access dialog names them. */
const SCOPE_LABELS: Record<KeyScope, string> = {
  "products:read": "Products and competitors",
  "history:read": "Price history",
  "events:read": "Events feed and stream",
  "sandbox:write": "Sandbox price changes (test keys)",
};

/** The grace-period choice shared by key rotation and webhook secret rotation. */
const GRACE_CHOICES = [
  ["0", "None", "the old one stops at once"],
  ["3600", "1 hour", ""],
  ["86400", "1 day", "recommended"],
  ["604800", "7 days", "the longest"],
] as const;

/** A dialog's form ends alike: its feedback slot, then Cancel (a plain button that closes the dialog) and the submit button. */
export const formEnd = ({ submit, id, cancel = "Cancel" }: { submit: string; id?: string; cancel?: string }) => `${feedback()}
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

/** A rule's text field, named by its wire field (src/dashboard/browser/form-fields.ts reads the API's errors by it). */
const ruleField = ({ field, label, hint, attributes = "" }: { field: string; label: string; hint: string; attributes?: string }) =>
  `<div class="field">
        <label for="rule-${field}">${label}</label>
        <input id="rule-${field}" name="filters.${field}" autocomplete="off" aria-describedby="rule-${field}-hint" ${attributes}>
        <p id="rule-${field}-hint" class="hint">${hint}</p>
      </div>`;

/** A list rule: one value a line, exact match. */
const ruleList = ({ field, label, placeholder }: { field: string; label: string; placeholder: string }) =>
  `<div class="field">
        <label for="rule-${field}">${label}</label>
        <textarea id="rule-${field}" name="filters.${field}" rows="3" spellcheck="false" autocomplete="off"
          aria-describedby="rule-lists-hint" placeholder="${placeholder}"></textarea>
      </div>`;

const AMOUNT = 'inputmode="decimal" placeholder="12.00" aria-describedby="rule-money-hint"';
const DAYS = 'inputmode="numeric" placeholder="30"';

/**
 * The webhook's alert rules (`filters`, src/alerts/schema.ts), each field named by its wire field: the API
 * checks them (its 400 is shown in these labels' words). The currency list is the API's own.
 */
const ALERT_RULES = `<details class="rules" id="webhook-rules">
    <summary>Alert rules: send only some events (optional)</summary>
    <p class="hint">An event is sent only when it meets every rule you fill in. Leave them all empty to receive every
      event of the types above.</p>
    <div class="field">
      <label for="rule-direction">Direction of the price change</label>
      <select id="rule-direction" name="filters.direction">
        <option value="">Up or down</option>
        <option value="down">Down only</option>
        <option value="up">Up only</option>
      </select>
    </div>
    <fieldset class="field group">
      <legend>Price thresholds</legend>
      <p id="rule-money-hint" class="hint">Amounts are in the currency below, which is required as soon as you set
        an amount: a price in another currency never matches. Use a point for decimals.</p>
      ${ruleField({
        field: "currency",
        label: "Currency",
        hint: "Three letters (ISO 4217), e.g. EUR or USD.",
        attributes: 'list="currencies" maxlength="3" placeholder="EUR" autocapitalize="characters" spellcheck="false"',
      })}
      <datalist id="currencies">${CURRENCY_CODES.map((code) => `<option value="${code}"></option>`).join("")}</datalist>
      <div class="field-row">
        ${ruleField({ field: "price_below", label: "Price falls below", hint: "Sent once as it crosses below.", attributes: AMOUNT })}
        ${ruleField({ field: "price_above", label: "Price rises above", hint: "Sent once as it crosses above.", attributes: AMOUNT })}
      </div>
      ${ruleField({
        field: "min_change_abs",
        label: "Smallest price change, as an amount",
        hint: "Either way, e.g. 1.00 sends 10.00 → 8.99 but not 10.00 → 10.50.",
        attributes: AMOUNT.replace("12.00", "1.00"),
      })}
    </fieldset>
    <fieldset class="field group">
      <legend>New lows and highs</legend>
      <div class="field-row">
        ${ruleField({
          field: "new_low_days",
          label: "New low over (days)",
          hint: "The new price is below every price of that offer in the last N days.",
          attributes: DAYS,
        })}
        ${ruleField({
          field: "new_high_days",
          label: "New high over (days)",
          hint: "The new price is above every price of that offer in the last N days.",
          attributes: DAYS,
        })}
      </div>
    </fieldset>
    <fieldset class="field group">
      <legend>Which products and shops</legend>
      <p id="rule-lists-hint" class="hint">One a line, exact match. These apply to stock changes too; the rules above
        only to price changes.</p>
      <div class="field-row">
        ${ruleList({ field: "brands", label: "Brands", placeholder: "Acme" })}
        ${ruleList({ field: "categories", label: "Categories", placeholder: "Headphones" })}
      </div>
      <div class="field-row">
        ${ruleList({ field: "competitors", label: "Competitor ids", placeholder: "cmp_amazon" })}
        ${ruleList({ field: "skus", label: "Products (SKUs)", placeholder: "SKU-12345" })}
      </div>
    </fieldset>
  </details>`;

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
      <select id="key-expiry" name="expires_at">
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
    ${ALERT_RULES}
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
      <textarea id="access-ips" name="allowed_ips" data-list="words" rows="4" spellcheck="false" autocomplete="off"
        aria-describedby="access-ips-hint" placeholder="203.0.113.0/24&#10;2001:db8::/32"></textarea>
      <p id="access-ips-hint" class="hint">One IPv4 or IPv6 address or CIDR range a line, at most 50. Empty: any address.
        A request from elsewhere is refused (403) and not counted.</p>
    </div>
    ${formEnd({ submit: "Save access" })}
  </form>
</dialog>

<dialog id="connect-dialog" aria-labelledby="connect-title" aria-describedby="connect-text">
  <h2 id="connect-title">Connect an AI client?</h2>
  <form id="connect-form">
    <p id="connect-text"></p>
    <p id="connect-loopback" class="hint" hidden><strong>Its access goes to an app on this computer.</strong> Continue
      only if you just started connecting from it: any program here could be listening.</p>
    <fieldset class="field">
      <legend>Data it may read, through /mcp</legend>
      ${Object.entries(SCOPE_LABELS)
        .filter(([scope]) => scope !== "sandbox:write")
        .map(
          ([scope, label]) =>
            `<label class="check"><input type="checkbox" name="scopes" value="${scope}"> ${label} <code ` +
            `class="hint">${scope}</code></label>`,
        )
        .join("\n      ")}
      <p class="hint">It gets a key of its own (a connector, in your key list) with your plan's limits; revoke it there to
        disconnect it.</p>
    </fieldset>
    ${feedback()}
    <div class="actions">
      <button type="button" id="connect-deny">Deny</button>
      <button type="submit" class="primary">Allow</button>
    </div>
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

<dialog id="send-change-dialog" aria-labelledby="send-change-title">
  <h2 id="send-change-title">Send a price change</h2>
  <form id="send-change-form">
    <p class="hint">Changes one offer in your sandbox, as a price feed would (<code>POST /test/observations</code> with a
      test key). Your test webhooks whose rules it meets get the event within seconds; live data and live webhooks never
      see it.</p>
    <fieldset class="field group">
      <legend>Test key</legend>
      <p id="change-key-hint" class="hint">The dashboard signs in as you, but this call takes an API key. A test key you
        create or paste here is kept in this page's memory only (never stored), until you leave or reload it.</p>
      <div class="field">
        <label for="change-key">Send with</label>
        <select id="change-key" aria-describedby="change-key-hint"></select>
      </div>
      <div class="field" id="change-key-paste">
        <label for="change-key-secret">Paste a test key</label>
        <input id="change-key-secret" type="password" autocomplete="off" spellcheck="false" placeholder="pda_test_…">
      </div>
      <button type="button" id="change-create-key">Create a test key for this</button>
    </fieldset>
    <div class="field">
      <label for="change-sku">Product (SKU)</label>
      <div class="copy-row">
        <input id="change-sku" name="observations.sku" required autocomplete="off" spellcheck="false" aria-describedby="change-sku-hint">
        <button type="button" id="change-look-up">Look up<span class="visually-hidden"> the product</span></button>
      </div>
      <p id="change-sku-hint" class="hint">A product of your sandbox: its SKU begins <code>TEST-</code>.</p>
    </div>
    <p id="change-product" class="product-line" aria-live="polite"></p>
    <div class="field">
      <label for="change-offer">Offer to change</label>
      <select id="change-offer" name="observations.competitor.id" required></select>
    </div>
    <div class="field">
      <label for="change-price">New price</label>
      <input id="change-price" name="observations.price" required inputmode="decimal" autocomplete="off" aria-describedby="change-price-hint">
      <p id="change-price-hint" class="hint">In the offer's currency, with a point for decimals.</p>
    </div>
    <label class="check"><input type="checkbox" id="change-in-stock" name="observations.in_stock"> In stock</label>
    ${formEnd({ submit: "Send price change", cancel: "Close" })}
  </form>
</dialog>

<dialog id="deliveries-dialog" aria-labelledby="deliveries-title" class="wide">
  <h2 id="deliveries-title" tabindex="-1">Recent deliveries</h2>
  <div id="deliveries"></div>
  <form method="dialog" class="actions"><button value="close">Close</button></form>
</dialog>`;
