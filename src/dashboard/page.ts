/** What the browser code needs to sign in; it reaches the page as data attributes on <body>. */
export interface PageSettings {
  issuer: string;
  clientId: string;
  audience: string;
  assetVersion: string;
}

const escapeHtml = (value: string) =>
  value.replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]!);

/**
 * An area for one kind of resource (#create-<name>, #new-<name>, #<name>s): its create form, the slot
 * where a new secret is shown once, and the list.
 */
function resourceSection(name: string, title: string, submit: string, fields: string): string {
  return `<section aria-labelledby="${name}s-title">
      <h2 id="${name}s-title" tabindex="-1">${title}</h2>
      <form id="create-${name}">${fields}
        <button type="submit" class="primary">${submit}</button>
      </form>
      <div id="new-${name}"></div>
      <ul id="${name}s" class="cards" aria-labelledby="${name}s-title"></ul>
    </section>`;
}

/**
 * The dashboard's one page (also served at /dashboard/callback). Static markup only: the script
 * (src/dashboard/client/) fills it in with textContent, never with HTML.
 */
export function dashboardPage({ issuer, clientId, audience, assetVersion }: PageSettings): string {
  const asset = (ext: string) => `/dashboard/assets/app-${assetVersion}.${ext}`;
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
  <div id="who" class="who" hidden>
    <span>Signed in as <strong id="who-name"></strong></span>
    <button id="sign-out" type="button">Sign out</button>
  </div>
</header>
<main id="main" tabindex="-1">
  <p id="status" class="status" role="status" aria-live="polite"></p>
  <p id="error" class="error" role="alert"></p>

  <section id="signed-out" hidden aria-labelledby="signed-out-title">
    <h1 id="signed-out-title" tabindex="-1">Sign in to manage your API keys</h1>
    <p>You sign in at your identity provider; this page never sees your password.</p>
    <button id="sign-in" type="button" class="primary">Sign in</button>
  </section>

  <div id="app" hidden>
    <h1 id="app-title" tabindex="-1">Dashboard</h1>

    <section aria-labelledby="plan-title">
      <h2 id="plan-title">Plan</h2>
      <div id="plan"><p>Loading…</p></div>
    </section>

    ${resourceSection("key", "API keys", "Create key", `
        <div class="field">
          <label for="key-name">Name of the new key</label>
          <input id="key-name" name="name" required maxlength="100" autocomplete="off" aria-describedby="key-name-hint">
          <p id="key-name-hint" class="hint">Say where it will be used, e.g. “Production server”.</p>
        </div>`)}

    ${resourceSection("webhook", "Webhooks", "Add webhook", `
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
        </div>`)}
  </div>
</main>

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
  <h2 id="deliveries-title">Recent deliveries</h2>
  <div id="deliveries"></div>
  <form method="dialog" class="actions"><button value="close">Close</button></form>
</dialog>
</body>
</html>
`;
}
