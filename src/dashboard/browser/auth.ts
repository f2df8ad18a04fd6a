/**
 * Sign-in by OpenID Connect authorization code + PKCE (oauth4webapi), against IDP_ISSUER's discovery.
 * - The access token is kept in memory only (see api.ts); nothing token-like goes to localStorage.
 * - For the round trip to the IdP, sessionStorage holds the PKCE verifier and state (this tab only),
 *   removed as soon as the callback is handled.
 * - A reload keeps the session by signing in again silently: sessionStorage remembers only that this tab
 *   was signed in, the page redirects to the IdP with prompt=none, and a live IdP session sends it
 *   straight back with a new code. With no IdP session the page shows "Sign in" again.
 */
import * as oauth from "oauth4webapi";

export interface DashboardSettings {
  issuer: string;
  clientId: string;
  audience: string;
}

export interface Session {
  accessToken: string;
  idToken: string | undefined;
  subject: string | undefined;
}

const PENDING = "price-data-dashboard:pending-login";
const SIGNED_IN = "price-data-dashboard:signed-in";
const CALLBACK_PATH = "/dashboard/callback";
const HOME_PATH = "/dashboard/";

interface PendingLogin {
  state: string;
  codeVerifier: string;
  silent: boolean;
}

/** Thrown for a silent sign-in that needs the user (no live IdP session): not an error to show. */
export class LoginRequired extends Error {}

// http:// is accepted only for an IdP on this machine (the local development IdP).
const insecureAllowed = (url: URL) => url.protocol === "http:" && ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname);

let discovered: Promise<oauth.AuthorizationServer> | undefined;
function discover(settings: DashboardSettings): Promise<oauth.AuthorizationServer> {
  discovered ??= (async () => {
    const issuer = new URL(settings.issuer);
    const options = { [oauth.allowInsecureRequests]: insecureAllowed(issuer) };
    try {
      return await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, options));
    } catch (error) {
      discovered = undefined;
      throw new Error(`Could not reach the sign-in service at ${settings.issuer} (${describe(error)}). Try again in a moment.`);
    }
  })();
  return discovered;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

const redirectUri = () => `${location.origin}${CALLBACK_PATH}`;

/** Goes to the IdP's authorization endpoint; `silent` asks it not to show any page (prompt=none). */
export async function startLogin(settings: DashboardSettings, silent = false): Promise<void> {
  const as = await discover(settings);
  if (!as.authorization_endpoint) throw new Error("The identity provider publishes no authorization endpoint.");
  const pending: PendingLogin = { state: oauth.generateRandomState(), codeVerifier: oauth.generateRandomCodeVerifier(), silent };
  const url = new URL(as.authorization_endpoint);
  url.search = new URLSearchParams({
    client_id: settings.clientId,
    redirect_uri: redirectUri(),
    response_type: "code",
    scope: "openid",
    state: pending.state,
    code_challenge: await oauth.calculatePKCECodeChallenge(pending.codeVerifier),
    code_challenge_method: "S256",
    // Auth0 issues a JWT for the API only when asked for its audience; other IdPs ignore the parameter.
    audience: settings.audience,
    ...(silent ? { prompt: "none" } : {}),
  }).toString();
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  location.assign(url);
}

/** On /dashboard/callback: checks the state, redeems the code with the PKCE verifier. */
export async function finishLogin(settings: DashboardSettings): Promise<Session> {
  const callbackUrl = new URL(location.href);
  const raw = sessionStorage.getItem(PENDING);
  sessionStorage.removeItem(PENDING);
  history.replaceState(null, "", HOME_PATH); // the code must not stay in the address bar or history
  if (!raw) throw new Error("This sign-in link has already been used or was not started here. Sign in again.");
  const pending = JSON.parse(raw) as PendingLogin;
  const as = await discover(settings);
  const client: oauth.Client = { client_id: settings.clientId };
  const options = { [oauth.allowInsecureRequests]: insecureAllowed(new URL(settings.issuer)) };
  let params: URLSearchParams;
  try {
    params = oauth.validateAuthResponse(as, client, callbackUrl, pending.state);
  } catch (error) {
    const cause = error instanceof oauth.AuthorizationResponseError ? error : undefined;
    if (pending.silent && cause && ["login_required", "interaction_required", "consent_required"].includes(cause.error)) {
      throw new LoginRequired();
    }
    throw new Error(`Sign-in was not completed: ${cause?.error_description ?? cause?.error ?? describe(error)}.`);
  }
  try {
    const response = await oauth.authorizationCodeGrantRequest(
      as,
      client,
      oauth.None(),
      params,
      redirectUri(),
      pending.codeVerifier,
      options,
    );
    const result = await oauth.processAuthorizationCodeResponse(as, client, response);
    sessionStorage.setItem(SIGNED_IN, "1");
    return { accessToken: result.access_token, idToken: result.id_token, subject: oauth.getValidatedIdTokenClaims(result)?.sub };
  } catch (error) {
    throw new Error(`Sign-in failed at the token step: ${describe(error)}.`);
  }
}

/** True when this tab signed in before (a reload): the page then signs in again silently. */
export const wasSignedIn = () => sessionStorage.getItem(SIGNED_IN) === "1";

export const isCallback = () => location.pathname === CALLBACK_PATH;

export function forgetSession(): void {
  sessionStorage.removeItem(SIGNED_IN);
}

/**
 * Forgets the session here, then ends it at the IdP (RP-initiated logout), which comes back to
 * /dashboard/. Returns false when the IdP has no logout endpoint (only this page is signed out).
 */
export async function logout(settings: DashboardSettings, session: Session | undefined): Promise<boolean> {
  forgetSession();
  const as = await discover(settings).catch(() => undefined);
  if (!as?.end_session_endpoint) return false;
  const url = new URL(as.end_session_endpoint);
  url.searchParams.set("client_id", settings.clientId);
  url.searchParams.set("post_logout_redirect_uri", `${location.origin}${HOME_PATH}`);
  if (session?.idToken) url.searchParams.set("id_token_hint", session.idToken);
  location.assign(url);
  return true;
}
