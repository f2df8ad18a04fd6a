/**
 * One-click connect's consent (src/connect/): GET /oauth/authorize sends the browser here with `#connect=<handle>`. The
 * handle is kept across the sign-in (the IdP's round trip loses the hash), and once the account has loaded the dashboard
 * asks: the client's self-asserted name, where its access goes, the scopes. Allow or Deny goes back to the API with the
 * account login (the handle's cookie rides along, same origin), and the browser follows `redirect_to` to the client.
 */
import type { components } from "../../../client/schema.d.ts";
import { api } from "./api.ts";
import { openDialog } from "./dialogs.ts";
import { attempt, byId, onSubmit, slotIn } from "./dom.ts";

type Consent = components["schemas"]["Consent"];
type ConsentOutcome = components["schemas"]["ConsentOutcome"];

const PENDING = "price-data-dashboard:connect";
const HASH = "#connect=";

/** On load: a consent named in the address is remembered for this tab, and the address is cleaned. */
export function rememberConsent(): void {
  if (!location.hash.startsWith(HASH)) return;
  sessionStorage.setItem(PENDING, decodeURIComponent(location.hash.slice(HASH.length)));
  history.replaceState(null, "", location.pathname);
}

const consentPath = (handle: string) => `/oauth/consents/${encodeURIComponent(handle)}`;

async function answer(handle: string, body: { allow: boolean; scopes?: string[] }): Promise<void> {
  const outcome = await api<ConsentOutcome>("POST", consentPath(handle), body);
  sessionStorage.removeItem(PENDING);
  location.assign(outcome.redirect_to);
}

/** Once signed in and loaded: asks about the remembered consent, if any (it works once, for 10 minutes). */
export async function askConsent(): Promise<void> {
  const handle = sessionStorage.getItem(PENDING);
  if (!handle) return;
  let consent: Consent;
  try {
    consent = await api<Consent>("GET", consentPath(handle));
  } catch (error) {
    sessionStorage.removeItem(PENDING);
    throw error;
  }
  const dialog = byId<HTMLDialogElement>("connect-dialog");
  const form = byId<HTMLFormElement>("connect-form");
  byId("connect-text").textContent =
    `“${consent.client_name}” (a name it gave itself) asks to read your price data through /mcp. ` +
    `Its access will be sent to ${consent.redirect_host}.`;
  byId("connect-loopback").hidden = !consent.redirect_is_loopback;
  for (const box of form.querySelectorAll<HTMLInputElement>('input[name="scopes"]'))
    box.checked = consent.requested_scopes.includes(box.value as Consent["scopes"][number]);
  onSubmit(form, () => {
    const scopes = [...form.querySelectorAll<HTMLInputElement>('input[name="scopes"]:checked')].map((box) => box.value);
    if (scopes.length === 0) throw new Error("Tick at least one kind of data, or Deny.");
    return answer(handle, { allow: true, scopes });
  });
  const deny = byId<HTMLButtonElement>("connect-deny");
  deny.addEventListener("click", () => void attempt(() => answer(handle, { allow: false }), slotIn(form), deny));
  await openDialog(dialog, form.querySelector<HTMLElement>('input[name="scopes"]'));
}
