import { DIALOGS, feedback } from "./page-dialogs.ts";
import { EXPORT_DIALOG } from "./page-export-dialog.ts";

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

/** A view's heading row: the title (which says "test mode" in test mode), a line on what it is for, and its main button. */
function viewHead({ name, title, intro, button = "" }: { name: string; title: string; intro: string; button?: string }): string {
  return `<div class="view-head">
      <div>
        <h1 id="${name}-title" tabindex="-1">${title}<span class="test-tag"> · test mode</span></h1>
        <p class="hint">${intro}</p>
      </div>
      ${button}
    </div>`;
}

/**
 * The dashboard's one page (also served at /dashboard/callback). Static markup only: the script
 * (src/dashboard/browser/) fills it in with textContent, never with HTML. Five views (Keys,
 * Webhooks, Exports, Usage, Activity) are chosen by the URL's hash; forms live in <dialog>s opened by their buttons.
 */
export function dashboardPage({ issuer, clientId, audience, assetVersion }: PageSettings): string {
  const asset = (ext: string) => `/dashboard/assets/app-${assetVersion}.${ext}`;
  const localIdpNote = isLocalIdp(issuer)
    ? `<p class="dev-note"><strong>Development sign-in.</strong> The local identity provider at ${escapeHtml(issuer)} ` +
      "accepts any user name with any password; each name is its own account. " +
      "A real deployment signs in at your company's identity provider instead.</p>"
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
    <a href="#exports" data-view="exports">Exports</a>
    <a href="#usage" data-view="usage">Usage</a>
    <a href="#activity" data-view="activity">Activity</a>
  </nav>
  <div id="who" class="who" hidden>
    <button id="environment-switch" type="button" role="switch" aria-checked="false" class="mode-switch"
      aria-describedby="environment-switch-hint">Test mode</button>
    <span id="environment-switch-hint" class="visually-hidden">Shows test keys, test webhooks and the sandbox instead of live ones</span>
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
    <section id="test-banner" class="test-banner" aria-labelledby="test-banner-title" hidden>
      <p><strong id="test-banner-title">Test mode</strong>: test keys (<code>pda_test_…</code>), test webhooks, and the usage
        and activity of your sandbox, a made-up catalogue of 1,000 products. Nothing here reads or changes live data.</p>
      <button id="open-send-change" type="button">Send a price change</button>
    </section>
    <p id="plan" class="plan">Loading your plan…</p>

    <section id="load-error" class="panel narrow load-error" role="alert" aria-labelledby="load-error-title" hidden>
      <h1 id="load-error-title" tabindex="-1">Your account could not be loaded</h1>
      <p id="load-error-text"></p>
      <p class="hint">Your keys and webhooks are unaffected: only this page could not read them.</p>
      <button id="load-retry" type="button" class="primary">Try again</button>
    </section>

    <section id="view-keys" class="view" aria-labelledby="keys-title" hidden>
      ${viewHead({
        name: "keys",
        title: "API keys",
        intro: "Your servers send one in the Authorization header. Each key gets the plan's limits on its own.",
        button: `<button id="open-create-key" type="button" class="primary">Create key</button>`,
      })}
      ${feedback("keys-feedback")}
      <div id="leaks"></div>
      <div class="list-tools"><button id="show-revoked" type="button" class="link" aria-pressed="false" hidden></button></div>
      <table class="keys-table" aria-labelledby="keys-title">
        <thead>
          <tr>
            <th scope="col">Name</th><th scope="col">Key</th><th scope="col">Created</th><th scope="col">Last used</th>
            <th scope="col">Expires</th><th scope="col">Access</th><th scope="col"><span class="visually-hidden">Actions</span></th>
          </tr>
        </thead>
        <tbody id="keys"></tbody>
      </table>
    </section>

    <section id="view-webhooks" class="view" aria-labelledby="webhooks-title" hidden>
      ${viewHead({
        name: "webhooks",
        title: "Webhooks",
        intro: "We send a signed POST to your endpoint when a price or stock level changes.",
        button: `<button id="open-add-webhook" type="button" class="primary">Add webhook</button>`,
      })}
      ${feedback("webhooks-feedback")}
      <ul id="webhooks" class="cards" aria-labelledby="webhooks-title"></ul>
    </section>

    <section id="view-exports" class="view" aria-labelledby="exports-title" hidden>
      ${viewHead({
        name: "exports",
        title: "Exports",
        intro: "The catalogue or its price and stock changes as Parquet or NDJSON files, to download or in your own S3 bucket.",
        button: `<button id="open-new-export" type="button" class="primary">New export</button>`,
      })}
      ${feedback("exports-feedback")}
      <ul id="exports" class="cards" aria-labelledby="exports-title"></ul>
    </section>

    <section id="view-usage" class="view" aria-labelledby="usage-title" hidden>
      ${viewHead({
        name: "usage",
        title: "Usage",
        intro:
          "Requests admitted and refused, counted by each key as they arrive. Refused: over a limit (429), the key expired or " +
          "revoked (401), or outside what the key may do: its scopes, allowed IPs or environment (403).",
      })}
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
      ${viewHead({
        name: "activity",
        title: "Activity",
        intro: "What happened to your keys and webhooks in the last 30 days, newest first.",
      })}
      ${feedback("activity-feedback")}
      <div id="activity"></div>
    </section>
  </div>
</main>

${DIALOGS}
${EXPORT_DIALOG}
</body>
</html>
`;
}
