/** The dashboard: signs in through the IdP, then shows the plan, the API keys and the webhooks. */
import type { components } from "../../../client/schema.d.ts";
import { api, useAccessToken } from "./api.ts";
import { finishLogin, forgetSession, isCallback, LoginRequired, logout, startLogin, wasSignedIn, type DashboardSettings, type Session } from "./auth.ts";
import { announce, attempt, byId, clearMessages, el, facts, setUpDialogs, showError } from "./dom.ts";
import { loadKeys, setUpKeys } from "./keys.ts";
import { loadWebhooks, setUpWebhooks } from "./webhooks.ts";

type Account = components["schemas"]["Account"];

const data = document.body.dataset;
const settings: DashboardSettings = { issuer: data.issuer ?? "", clientId: data.clientId ?? "", audience: data.audience ?? "" };
let session: Session | undefined;

function showSignedOut(error?: string): void {
  session = undefined;
  useAccessToken(undefined);
  byId("app").hidden = true;
  byId("who").hidden = true;
  byId("signed-out").hidden = false;
  if (error) showError(error);
  byId("signed-out-title").focus();
}

async function loadAccount(): Promise<void> {
  const account = await api<Account>("GET", "/account");
  const count = (n: number) => n.toLocaleString();
  byId("who-name").textContent = account.id;
  byId("plan").replaceChildren(
    facts([
      ["Plan", account.plan.charAt(0).toUpperCase() + account.plan.slice(1)],
      ["Requests per minute", count(account.limits.per_minute)],
      ["Requests per hour", count(account.limits.per_hour)],
      ["Requests per day", count(account.limits.per_day)],
    ]),
    el("p", { class: "hint" }, "Each key counts on its own, so every key gets these limits."),
  );
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
  byId("app").hidden = false;
  announce("Signed in.");
  byId("app-title").focus();
  await Promise.all([attempt(loadAccount), attempt(() => loadKeys()), attempt(loadWebhooks)]);
}

async function signOut(): Promise<void> {
  const ending = session;
  showSignedOut();
  clearMessages();
  if (!(await logout(settings, ending))) announce("Signed out of the dashboard. Your session at the identity provider is still open.");
}

async function start(): Promise<void> {
  setUpDialogs();
  setUpKeys();
  setUpWebhooks();
  byId("sign-in").addEventListener("click", (event) => void attempt(() => startLogin(settings), event.currentTarget as HTMLButtonElement));
  byId("sign-out").addEventListener("click", () => void attempt(signOut));
  if (isCallback()) {
    announce("Signing you in…");
    try {
      await showApp(await finishLogin(settings));
    } catch (error) {
      forgetSession();
      if (error instanceof LoginRequired) {
        clearMessages();
        showSignedOut();
      } else {
        showSignedOut(error instanceof Error ? error.message : String(error));
      }
    }
  } else if (wasSignedIn()) {
    // A reload: the token was in memory only, so sign in again through the IdP's session (no page shown).
    announce("Signing you in again…");
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
