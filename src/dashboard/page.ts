import type { KeyScope } from "../rate-limit/key-scopes.ts";

/** What the browser code needs to sign in; it reaches the page as data attributes on <body>. */
export interface PageSettings {
  issuer: string;
  clientId: string;
  audience: string;
  assetVersion: string;
}

const escapeHtml = (value: string) =>
  value.replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]!);

/** The development IdP (scripts/idp.ts) runs on this machine; a real one never does. */
function isLocalIdp(issuer: string): boolean {
  try {
    return ["127.0.0.1", "localhost", "[::1]"].includes(new URL(issuer).hostname);
  } catch {
    return false;
  }
}

const feedback = (id = "") => `<p class="feedback" role="status"${id ? ` id="${id}"` : ""}></p>`;

/** A view's heading row: the title, a line on what it is for, and its main button. */
function viewHead(name: string, title: string, intro: string, button = ""): string {
  return `<div class="view-head">
      <div>
        <h1 id="${name}-title" tabindex="-1">${title}</h1>
        <p class="hint">${intro}</p>
      </div>
      ${button}
    </div>`;
}

/** The scopes a key may hold (src/rate-limit/key-scopes.ts), as the access dialog names them. */
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

/**
 * The dashboard's one page (also served at /dashboard/callback). Static markup only: the script
 * (src/dashboard/browser/) fills it in with textContent, never with HTML. Four views (Keys,
 * Webhooks, Usage, Activity) are chosen by the URL's hash; forms live in <dialog>s opened by their buttons.
 */
export function dashboardPage({ issuer, clientId, audience, assetVersion }: PageSettings): string {
  const asset = (ext: string) => `/dashboard/assets/app-${assetVersion}.${ext}`;
  const localIdpNote = isLocalIdp(issuer)
    ? `<p class="dev-note"><strong>Development sign-in.</strong> The local identity provider at ${escapeHtml(issuer)} accepts any user name with any password; each name is its own account. A real deployment signs in at your company's identity provider instead.</p>`
    : "";
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Dashboard · Price Data API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${asset("css")}">
<script type="module" src="${asset("js")}"></script>
</head>
<body data-issuer="${escapeHtml(issuer)}" data-client-id="${escapeHtml(clientId)}" data-audience="${escapeHtml(audience)}">
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <p class="brand">Price Data API</p>
  <nav id="tabs" class="tabs" aria-label="Dashboard" hidden>
    <a href="#keys" data-view="keys">Keys</a>
    <a href="#webhooks" data-view="webhooks">Webhooks</a>
    <a href="#usage" data-view="usage">Usage</a>
    <a href="#activity" data-view="activity">Activity</a>
  </nav>
  <div id="who" class="who" hidden>
    <span><span class="who-prefix">Signed in as </span><strong id="who-name"></strong></span>
    <button id="sign-out" type="button">Sign out</button>
  </div>
</header>
<main id="main" tabindex="-1">
  <p id="announcer" class="visually-hidden" role="status"></p>

  <section id="signed-out" class="panel narrow" hidden aria-labelledby="signed-out-title">
    <h1 id="signed-out-title" tabindex="-1">Sign in to manage your API keys</h1>
    <p>You sign in at your identity provider; this page never sees your password.</p>
    ${localIdpNote}
    <button id="sign-in" type="button" class="primary">Sign in</button>
    ${feedback("signed-out-feedback")}
  </section>

  <div id="app" hidden>
    <p id="plan" class="plan">Loading your plan…</p>

    <section id="load-error" class="panel narrow load-error" role="alert" aria-labelledby="load-error-title" hidden>
      <h1 id="load-error-title" tabindex="-1">Your account could not be loaded</h1>
      <p id="load-error-text"></p>
      <p class="hint">Your keys and webhooks are unaffected: only this page could not read them.</p>
      <button id="load-retry" type="button" class="primary">Try again</button>
    </section>

    <section id="view-keys" class="view" aria-labelledby="keys-title" hidden>
      ${viewHead("keys", "API keys", "Your servers send one in the Authorization header. Each key gets the plan's limits on its own.", `<button id="open-create-key" type="button" class="primary">Create key</button>`)}
      ${feedback("keys-feedback")}
      <div id="leaks"></div>
      <div class="list-tools"><button id="show-revoked" type="button" class="link" aria-pressed="false" hidden></button></div>
      <table class="keys-table" aria-labelledby="keys-title">
        <thead>
          <tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Access</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr>
        </thead>
        <tbody id="keys"></tbody>
      </table>
    </section>

    <section id="view-webhooks" class="view" aria-labelledby="webhooks-title" hidden>
      ${viewHead("webhooks", "Webhooks", "We send a signed POST to your endpoint when a price or stock level changes.", `<button id="open-add-webhook" type="button" class="primary">Add webhook</button>`)}
      ${feedback("webhooks-feedback")}
      <ul id="webhooks" class="cards" aria-labelledby="webhooks-title"></ul>
    </section>

    <section id="view-usage" class="view" aria-labelledby="usage-title" hidden>
      ${viewHead("usage", "Usage", "Requests admitted and refused (over the limit), counted by each key as they arrive.")}
      <form id="usage-controls" class="usage-controls">
        <div class="field">
          <label for="usage-key">Key</label>
          <select id="usage-key" name="key"><option value="">All keys (account total)</option></select>
        </div>
        <fieldset class="field segmented">
          <legend>Period</legend>
          <label><input type="radio" name="range" value="last-hour"> 1 hour</label>
          <label><input type="radio" name="range" value="minute" checked> 24 hours</label>
          <label><input type="radio" name="range" value="hour"> 30 days</label>
          <label><input type="radio" name="range" value="day"> 12 months</label>
        </fieldset>
        <button id="usage-refresh" type="submit">Refresh</button>
      </form>
      ${feedback("usage-feedback")}
      <div id="usage"></div>
    </section>

    <section id="view-activity" class="view" aria-labelledby="activity-title" hidden>
      ${viewHead("activity", "Activity", "What happened to your keys and webhooks in the last 30 days, newest first.")}
      ${feedback("activity-feedback")}
      <div id="activity"></div>
    </section>
  </div>
</main>

<dialog id="create-key-dialog" aria-labelledby="create-key-title">
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
    ${feedback()}
    <div class="actions">
      <button type="button" data-cancel>Cancel</button>
      <button type="submit" class="primary">Create key</button>
    </div>
  </form>
  <div id="new-key"></div>
  <form method="dialog" class="actions" id="create-key-done" hidden><button value="done" class="primary">Done</button></form>
</dialog>

<dialog id="rotate-dialog" aria-labelledby="rotate-title" aria-describedby="rotate-text">
  <h2 id="rotate-title"></h2>
  <form id="rotate-form">
    <p id="rotate-text"></p>
    <fieldset class="field grace">
      <legend>How long the old one keeps working</legend>
      ${GRACE_CHOICES.map(
        ([value, label, note]) =>
          `<label class="check"><input type="radio" name="grace" value="${value}"${value === "86400" ? " checked" : ""}> ${label}${note ? ` <span class="hint">(${note})</span>` : ""}</label>`,
      ).join("\n      ")}
    </fieldset>
    ${feedback()}
    <div class="actions">
      <button type="button" data-cancel>Cancel</button>
      <button type="submit" id="rotate-ok" class="primary"></button>
    </div>
  </form>
  <div id="rotated"></div>
  <form method="dialog" class="actions" id="rotate-done" hidden><button value="done" class="primary">Done</button></form>
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
    ${feedback()}
    <div class="actions">
      <button type="button" data-cancel>Cancel</button>
      <button type="submit" id="webhook-submit" class="primary">Add webhook</button>
    </div>
  </form>
  <div id="new-webhook"></div>
  <form method="dialog" class="actions" id="webhook-done" hidden><button value="done" class="primary">Done</button></form>
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
    ${feedback()}
    <div class="actions">
      <button type="button" data-cancel>Close</button>
      <button type="submit" class="primary">Replay events</button>
    </div>
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
            `<label class="check"><input type="checkbox" name="scopes" value="${scope}"> ${label} <code class="hint">${scope}</code></label>`,
        )
        .join("\n      ")}
      <p class="hint">A request for anything else is refused (403) and not counted.</p>
    </fieldset>
    <div class="field">
      <label for="access-ips">Allowed IP addresses (optional)</label>
      <textarea id="access-ips" name="allowed_ips" rows="4" spellcheck="false" autocomplete="off" aria-describedby="access-ips-hint" placeholder="203.0.113.0/24&#10;2001:db8::/32"></textarea>
      <p id="access-ips-hint" class="hint">One IPv4 or IPv6 address or CIDR range a line, at most 50. Empty: any address. A request from elsewhere is refused (403) and not counted.</p>
    </div>
    ${feedback()}
    <div class="actions">
      <button type="button" data-cancel>Cancel</button>
      <button type="submit" class="primary">Save access</button>
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

<dialog id="deliveries-dialog" aria-labelledby="deliveries-title" class="wide">
  <h2 id="deliveries-title" tabindex="-1">Recent deliveries</h2>
  <div id="deliveries"></div>
  <form method="dialog" class="actions"><button value="close">Close</button></form>
</dialog>
</body>
</html>
`;
}
