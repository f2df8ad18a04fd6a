import { isolateMap } from "../platform/isolate-memory.ts";
import { logger } from "../platform/log.ts";

/**
 * The origins the dashboard's page calls at the identity provider, for its CSP `connect-src`: the
 * issuer's (discovery) and the token endpoint's, read from the IdP's discovery document, since many
 * IdPs keep them apart (Cognito: cognito-idp.<region>.amazonaws.com and <domain>.auth.<region>.amazoncognito.com;
 * Google: accounts.google.com and oauth2.googleapis.com). The authorization and logout endpoints are
 * navigations, which connect-src does not govern.
 */

/** A document read is used this long; one that could not be read is tried again after RETRY_MS. */
const FRESH_MS = 10 * 60_000;
const RETRY_MS = 30_000;
const FETCH_TIMEOUT_MS = 5_000;

/** OpenID Connect Discovery 1.0 §4: the issuer's path, then /.well-known/openid-configuration (as oauth4webapi builds it). */
function discoveryUrl(issuer: string): URL {
  const url = new URL(issuer);
  url.pathname = `${url.pathname}/.well-known/openid-configuration`.replace("//", "/");
  return url;
}

/** An http(s) URL's origin, or undefined for anything else (never a value that could break the CSP header). */
function httpOrigin(value: unknown): string | undefined {
  if (typeof value !== "string" || !URL.canParse(value)) return undefined;
  const url = new URL(value);
  return url.protocol === "https:" || url.protocol === "http:" ? url.origin : undefined;
}

async function readOrigins(issuer: string): Promise<{ origins: string[]; read: boolean }> {
  const issuerOrigin = new URL(issuer).origin;
  try {
    const res = await fetch(discoveryUrl(issuer), {
      headers: { Accept: "application/json" },
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    });
    if (!res.ok) throw new Error(`it answered ${res.status}`);
    const document = (await res.json()) as { token_endpoint?: unknown };
    const tokenOrigin = httpOrigin(document.token_endpoint);
    if (!tokenOrigin) throw new Error("it names no http(s) token_endpoint");
    return { origins: [...new Set([issuerOrigin, tokenOrigin])], read: true };
  } catch (error) {
    // The page still loads (and says so if sign-in fails); the issuer's origin is all that is known.
    logger("dashboard").warn("IdP discovery document unreadable", { issuer, error: String(error) });
    return { origins: [issuerOrigin], read: false };
  }
}

const cache = isolateMap<string, { origins: Promise<string[]>; until: number }>();

/** The origins, from a document read at most 10 minutes ago; concurrent page loads share one read. */
export function idpConnectOrigins(issuer: string, now = Date.now()): Promise<string[]> {
  const cached = cache.get(issuer);
  if (cached && now < cached.until) return cached.origins;
  const entry = { origins: Promise.resolve<string[]>([]), until: now + FRESH_MS };
  entry.origins = readOrigins(issuer).then(({ origins, read }) => {
    if (!read) entry.until = Date.now() + RETRY_MS;
    return origins;
  });
  cache.set(issuer, entry);
  return entry.origins;
}
