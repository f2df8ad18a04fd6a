/**
 * The dashboard: signs in through the IdP, then shows four views, chosen by the URL's hash:
 * Keys (#keys, the default), Webhooks (#webhooks), Exports (#exports), Usage (#usage) and Activity (#activity); in test mode the same
 * under #test/… (#test/webhooks: environment.ts).
 */
import type { components } from "../../../client/schema.d.ts";
import { loadActivity } from "./activity.ts";
import { ApiFailure, api, duration, useAccessToken } from "./api.ts";
import {
  type DashboardSettings,
  finishLogin,
  forgetSession,
  isCallback,
  LoginRequired,
  logout,
  type Session,
  startLogin,
  wasSignedIn,
} from "./auth.ts";
import { askConsent, rememberConsent } from "./connect.ts";
import { setUpDialogs } from "./dialogs.ts";
import { attempt, byId, clearFeedback, onSubmit, say, setUpMenus } from "./dom.ts";
import { environment, hashFor, keyLimits, onEnvironmentChanged, readHash, useEnvironment } from "./environment.ts";
import { loadExports, setUpExports } from "./exports.ts";
import { finishKeyRotation, loadKeys, onKeysChanged, setUpKeys } from "./keys.ts";
import { onTestKeyCreated, setUpSendChange } from "./send-change.ts";
import { loadUsage, offerKeys, setUpUsage, useLimits } from "./usage.ts";
import { finishSecretRotation, loadWebhooks, setUpWebhooks } from "./webhooks.ts";

type Account = components["schemas"]["Account"];

const data = document.body.dataset;
const settings: DashboardSettings = { issuer: data.issuer ?? "", clientId: data.clientId ?? "", audience: data.audience ?? "" };
let session: Session | undefined;
/** Whether the account, its keys and its webhooks have loaded: until then no view is shown. */
let loaded = false;

const VIEWS = ["keys", "webhooks", "exports", "usage", "activity"] as const;
type View = (typeof VIEWS)[number];
/** Across the silent sign-in of a reload, which loses the hash on its way through the IdP: "keys", "test/webhooks". */
const VIEW_KEY = "price-data-dashboard:view";

const viewIn = (hash: string): View | undefined => VIEWS.find((view) => view === readHash(hash).view);
const viewInHash = (): View | undefined => viewIn(location.hash);
const shownView = (): View | undefined => document.querySelector<HTMLElement>(".view:not([hidden])")?.id.replace("view-", "") as View;

/**
 * Shows the view and environment the hash names (a hash naming no view, e.g. #main from the skip link, keeps the current
 * ones); `focus` moves the focus to the view's title.
 */
function route(focus = true): void {
  if (!session || !loaded) return;
  const named = viewInHash();
  const view = named ?? shownView() ?? "keys";
  for (const name of VIEWS) byId(`view-${name}`).hidden = name !== view;
  // After the views are shown: a view told of a new environment redraws only if it shows.
  const switched = useEnvironment(named ? readHash(location.hash).env : environment());
  for (const link of byId("tabs").querySelectorAll<HTMLAnchorElement>("a")) {
    link.href = hashFor(link.dataset.view ?? "keys");
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  sessionStorage.setItem(VIEW_KEY, hashFor(view).slice(1));
  // The title's own text, without its "· test mode" tag, which the title then starts with.
  const title = byId(`${view}-title`).firstChild?.textContent;
  document.title = `${environment() === "test" ? "Test mode · " : ""}${title} · Price Data API`;
  clearFeedback();
  if (focus) byId(`${view}-title`).focus();
  // A switch of environment has redrawn the usage already (its key list changed).
  if (view === "usage" && !switched) void attempt(loadUsage, byId("usage-feedback"));
  if (view === "activity") void attempt(loadActivity, byId("activity-feedback"));
  // Read on each visit: its progress and download links change while it is away.
  if (view === "exports") void attempt(loadExports, byId("exports-feedback"));
}

/** The Test mode switch: the same view in the other environment, the focus staying on the switch. */
function toggleEnvironment(): void {
  history.pushState(null, "", hashFor(shownView() ?? "keys", environment() === "test" ? "live" : "test"));
  route(false);
  byId("announcer").textContent =
    environment() === "test" ? "Test mode on: test keys, test webhooks and the sandbox are shown." : "Test mode off: live data is shown.";
}

function showSignedOut(message?: string): void {
  session = undefined;
  useAccessToken(undefined);
  loaded = false;
  byId("app").hidden = true;
  byId("who").hidden = true;
  byId("tabs").hidden = true;
  byId("signed-out").hidden = false;
  clearFeedback();
  if (message) say(byId("signed-out-feedback"), message, "error");
  byId("signed-out-title").focus();
}

let account: Account | undefined;

/** The plan's limits, or in test mode the test keys' (the standard plan's, whatever the account's plan). */
function showPlan(): void {
  if (!account) return;
  const count = (n: number) => n.toLocaleString();
  const plan = account.plan.charAt(0).toUpperCase() + account.plan.slice(1);
  const limits = keyLimits(account.limits);
  const each = environment() === "test" ? `${plan} plan · each test key (standard limits)` : `${plan} plan · each key`;
  byId("plan").textContent =
    `${each}: ${count(limits.per_minute)} requests a minute, ${count(limits.per_hour)} an hour, ${count(limits.per_day)} a day`;
}

async function loadAccount(): Promise<void> {
  account = await api<Account>("GET", "/account");
  byId("who-name").textContent = account.id;
  useLimits(account.limits);
  showPlan();
}

async function showApp(signedIn: Session): Promise<void> {
  session = signedIn;
  useAccessToken(signedIn.accessToken, (message) => {
    forgetSession();
    showSignedOut(message);
  });
  byId("signed-out").hidden = true;
  byId("who-name").textContent = signedIn.subject ?? "";
  byId("who").hidden = false;
  byId("tabs").hidden = false;
  byId("app").hidden = false;
  byId("announcer").textContent = "Signed in.";
  // The URL names the view and environment: the one saved across the sign-in, else the test keys when test mode is
  // remembered (a bare address is live).
  const saved = sessionStorage.getItem(VIEW_KEY);
  if (!viewInHash() && (saved || environment() === "test"))
    history.replaceState(null, "", saved && viewIn(saved) ? `#${saved}` : hashFor("keys"));
  await firstLoad();
}

/**
 * The account's limits, its keys and its webhooks, before any view shows (the Usage view draws with the
 * first two). A failure (the account's minute spent, a 5xx, no network) replaces the views with what
 * went wrong and a way to try again, rather than an empty view under "Loading your plan…".
 */
async function firstLoad(): Promise<void> {
  loaded = false;
  byId("plan").textContent = "Loading your plan…";
  byId("load-error").hidden = true;
  for (const name of VIEWS) byId(`view-${name}`).hidden = true;
  const results = await Promise.allSettled([loadAccount(), loadKeys(), loadWebhooks()]);
  const failure = results.find((result) => result.status === "rejected")?.reason as unknown;
  if (!session) return; // a 401 ended the session: the signed-out page says why
  if (failure === undefined) {
    loaded = true;
    route();
    // An AI client waiting for this account's consent (one-click connect): asked once the account is shown.
    void attempt(askConsent, byId("keys-feedback"));
    return;
  }
  showLoadError(failure);
}

let retryCountdown: ReturnType<typeof setInterval> | undefined;

function showLoadError(failure: unknown): void {
  byId("plan").textContent = "";
  byId("load-error-text").textContent = failure instanceof Error ? failure.message : String(failure);
  byId("load-error").hidden = false;
  const retry = byId<HTMLButtonElement>("load-retry");
  clearInterval(retryCountdown);
  // After a 429 the button waits out the Retry-After, counting down, so the next try is not refused too.
  let wait = failure instanceof ApiFailure ? (failure.retryAfterSeconds ?? 0) : 0;
  const tick = () => {
    retry.disabled = wait > 0;
    retry.textContent = wait > 0 ? `Try again in ${duration(wait)}` : "Try again";
    if (wait <= 0) clearInterval(retryCountdown);
    wait -= 1;
  };
  tick();
  if (retry.disabled) retryCountdown = setInterval(tick, 1000);
  byId("load-error-title").focus();
}

async function signOut(): Promise<void> {
  const ending = session;
  sessionStorage.removeItem(VIEW_KEY);
  showSignedOut();
  if (!(await logout(settings, ending)))
    say(byId("signed-out-feedback"), "Signed out of the dashboard. Your session at the identity provider is still open.");
}

async function start(): Promise<void> {
  rememberConsent();
  setUpDialogs();
  setUpMenus();
  setUpKeys();
  setUpWebhooks();
  setUpExports();
  setUpUsage();
  setUpSendChange();
  onTestKeyCreated(() => loadKeys());
  onKeysChanged(offerKeys);
  onEnvironmentChanged(showPlan);
  const rotateForm = byId<HTMLFormElement>("rotate-form");
  onSubmit(rotateForm, () => (rotateForm.dataset.kind === "key" ? finishKeyRotation(rotateForm) : finishSecretRotation(rotateForm)));
  byId("rotate-dialog").addEventListener("close", () => byId("rotated").replaceChildren()); // the new secret leaves with the dialog
  window.addEventListener("hashchange", () => route());
  byId("environment-switch").addEventListener("click", toggleEnvironment);
  const signedOutSlot = byId("signed-out-feedback");
  byId("sign-in").addEventListener(
    "click",
    (event) => void attempt(() => startLogin(settings), signedOutSlot, event.currentTarget as HTMLButtonElement),
  );
  byId("sign-out").addEventListener("click", () => void attempt(signOut, signedOutSlot));
  byId("load-retry").addEventListener("click", () => void firstLoad());
  if (isCallback()) {
    byId("announcer").textContent = "Signing you in…";
    try {
      await showApp(await finishLogin(settings));
    } catch (error) {
      forgetSession();
      showSignedOut(error instanceof LoginRequired ? undefined : error instanceof Error ? error.message : String(error));
    }
  } else if (wasSignedIn()) {
    // A reload: the token was in memory only, so sign in again through the IdP's session (no page shown).
    byId("announcer").textContent = "Signing you in again…";
    if (viewInHash()) sessionStorage.setItem(VIEW_KEY, location.hash.slice(1));
    try {
      await startLogin(settings, true);
    } catch (error) {
      forgetSession();
      showSignedOut(error instanceof Error ? error.message : String(error));
    }
  } else {
    showSignedOut();
  }
}

void start();
