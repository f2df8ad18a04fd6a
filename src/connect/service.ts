import { AuthorizationError, type OAuthHelpers } from "@cloudflare/workers-oauth-provider";
import { hashApiKey } from "../api-keys/format.ts";
import { createApiKey } from "../api-keys/service.ts";
import type { RequestServices } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import { sha256Hex } from "../platform/hash.ts";
import type { ConsentAnswer, ConsentOutcomeView, ConsentView } from "./schema.ts";
import { CONNECTOR_SCOPES, type ConnectorProps } from "./server.ts";

/**
 * The authorisation step of one-click connect. GET /oauth/authorize checks the client's request (the library: a
 * registered client, its exact redirect URI, S256 PKCE), binds a consent handle to the browser (a `__Host-` cookie) and
 * sends the browser to the dashboard, which signs the account holder in through the IdP as it always does and asks them;
 * their answer comes back with their account login, and an approval makes the grant's connector key.
 */

/** Where the dashboard finds the consent to ask about (a fragment: never sent to a server, never in a Referer). */
const CONSENT_PAGE = "/dashboard/#connect=";

/** What the dashboard shows, kept beside the library's own record of the request for as long as the handle works. */
const CONSENT_SECONDS = 600;
const consentRecord = async (handle: string) => `connect-consent:${await sha256Hex(handle)}`;

const ANOTHER_TRY = "start connecting again from the AI client.";

/** GET /oauth/authorize: the browser goes on to the dashboard's consent, or back to the client with the error. */
export async function startConsent(oauth: OAuthHelpers, kv: KVNamespace, request: Request): Promise<Response> {
  let authRequest: Awaited<ReturnType<OAuthHelpers["parseAuthRequest"]>>;
  try {
    authRequest = await oauth.parseAuthRequest(request);
  } catch (error) {
    if (!(error instanceof AuthorizationError)) throw error;
    // A redirect back is safe only once the client and its exact redirect URI are known; otherwise it is said here.
    if (error.redirectTo) return new Response(null, { status: 302, headers: { Location: error.redirectTo } });
    throw new ApiError(400, `This authorisation request cannot be answered: ${error.description}`);
  }
  const described = await oauth.describeConsent(authRequest);
  const requested = CONNECTOR_SCOPES.filter((scope) => described.scope.includes(scope));
  const view: ConsentView = {
    client_name: described.clientName,
    redirect_host: described.redirectHost,
    redirect_is_loopback: described.redirectIsLoopback,
    requested_scopes: requested.length > 0 ? requested : [...CONNECTOR_SCOPES],
    scopes: [...CONNECTOR_SCOPES],
  };
  const consent = await oauth.beginConsent(authRequest);
  await kv.put(await consentRecord(consent.handle), JSON.stringify(view), { expirationTtl: CONSENT_SECONDS });
  consent.headers.set("Location", `${CONSENT_PAGE}${encodeURIComponent(consent.handle)}`);
  return new Response(null, { status: 302, headers: consent.headers });
}

/** GET /oauth/consents/{handle}: what the account holder is asked. */
export async function readConsent(kv: KVNamespace, handle: string): Promise<ConsentView> {
  const view = await kv.get<ConsentView>(await consentRecord(handle), "json");
  if (!view) throw new ApiError(404, `No consent ${handle} is waiting: it was answered, or its 10 minutes passed; ${ANOTHER_TRY}`);
  return view;
}

/** A key's name from the client's own (self-asserted, so cleaned): no control characters, 1 to 100 characters. */
function connectorName(clientName: string): string {
  const cleaned = [...clientName.replace(/\p{Cc}/gu, " ").trim()].slice(0, 100).join("").trim();
  return cleaned === "" ? "AI client" : cleaned;
}

/** The library's refusal of a handle (used, expired, or opened in another browser), in words a person can act on. */
async function consumed<T>(step: Promise<T>): Promise<T> {
  try {
    return await step;
  } catch (error) {
    if (!(error instanceof AuthorizationError)) throw error;
    throw new ApiError(403, `This consent cannot be answered from here (${error.description}); ${ANOTHER_TRY}`);
  }
}

/**
 * POST /oauth/consents/{handle}: the account holder's answer, from the browser that holds the handle's cookie. Allowed:
 * a connector key of the account (live, named after the client, the scopes chosen, the plan's limits as every key of
 * the account), and the grant whose tokens act as it (its props hold the key's hash, encrypted by the library). The
 * cookies the library set for the handle are cleared by the headers returned.
 */
export async function answerConsent(
  services: Pick<RequestServices, "db" | "config">,
  oauth: OAuthHelpers,
  kv: KVNamespace,
  { accountId, handle, answer, request }: { accountId: string; handle: string; answer: ConsentAnswer; request: Request },
): Promise<{ outcome: ConsentOutcomeView; headers: Headers }> {
  const view = await readConsent(kv, handle);
  const record = await consentRecord(handle);
  if (!answer.allow) {
    const denied = await consumed(oauth.denyConsent(request, handle));
    await kv.delete(record);
    return { outcome: { redirect_to: denied.redirectTo, key_id: null }, headers: denied.headers };
  }
  const scopes = answer.scopes ?? view.requested_scopes;
  const approved = await consumed(oauth.approveConsent(request, handle, { scope: scopes }));
  const fields = { name: connectorName(view.client_name), environment: "live", allowed_ips: null, scopes } as const;
  const key = await createApiKey(services, { accountId, fields: { ...fields, scopes: [...scopes] }, kind: "connector" });
  const props: ConnectorProps = { keyHash: await hashApiKey(key.key) };
  // The grant's user is its key: one grant a key, its tokens `<key id>:…`, and the key's revocation ends the grant
  // (src/api-keys/connector-grants.ts).
  const { redirectTo } = await oauth.completeAuthorization({
    request: approved.request,
    userId: key.id,
    metadata: { account_id: accountId },
    scope: [...scopes],
    props,
  });
  await kv.delete(record);
  return { outcome: { redirect_to: redirectTo, key_id: key.id }, headers: approved.headers };
}
