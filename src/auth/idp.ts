import { createLocalJWKSet, errors, type JSONWebKeySet, type JWTVerifyGetKey, type JWTVerifyOptions, jwtVerify } from "jose";
import { ApiError } from "../http/errors.ts";
import type { Config } from "../platform/config.ts";
import { isolateMap } from "../platform/isolate-memory.ts";
import { logger } from "../platform/log.ts";
import { DAY_MS, MINUTE_MS } from "../platform/time.ts";

/** What a verified account-login or admin JWT tells us. */
export interface Identity {
  sub: string;
  scopes: ReadonlySet<string>;
}

/** A fetched key set is used this long before it is fetched again. */
const KEYS_FRESH_MS = 10 * MINUTE_MS;
/** When fetching fails, the last good key set is still used until it is this old (contract: 24 hours). */
const LAST_GOOD_KEYS_MS = DAY_MS;
/** After a fetch (failed, or for an unknown kid), none other for this long: an outage costs one wait per 30 s, not one per request. */
const REFETCH_COOLDOWN_MS = 30_000;
const FETCH_TIMEOUT_MS = 5_000;

const log = logger("idp-keys");

/**
 * The IdP's signing keys (its JWKS), for the isolate's life. One fetch at a time, shared by every request
 * that waits for it; when a refresh fails, the last good set goes on verifying tokens for up to 24 hours.
 */
class IdpKeySet {
  #good: { getKey: JWTVerifyGetKey; fetchedAt: number } | undefined;
  #loading: Promise<JWTVerifyGetKey> | undefined;
  #lastFetchAt = -Infinity;

  constructor(readonly url: string) {}

  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    const getKey = await this.#current();
    try {
      return await getKey(header, token);
    } catch (error) {
      // A kid we do not know: the IdP may have rotated its keys since; look once (at most every 30 s).
      if (!(error instanceof errors.JWKSNoMatchingKey) || Date.now() - this.#lastFetchAt < REFETCH_COOLDOWN_MS) throw error;
      return (await this.#load())(header, token);
    }
  };

  async #current(): Promise<JWTVerifyGetKey> {
    const good = this.#good;
    const now = Date.now();
    if (good && now - good.fetchedAt < KEYS_FRESH_MS) return good.getKey;
    let failure: unknown = "fetched less than 30 s ago";
    if (this.#loading || now - this.#lastFetchAt >= REFETCH_COOLDOWN_MS) {
      try {
        return await this.#load();
      } catch (error) {
        failure = error;
      }
    }
    if (good && now - good.fetchedAt < LAST_GOOD_KEYS_MS) return good.getKey;
    throw new Error(`The identity provider's key set at ${this.url} could not be fetched: ${String(failure)}`);
  }

  #load(): Promise<JWTVerifyGetKey> {
    this.#loading ??= this.#fetch().finally(() => (this.#loading = undefined));
    return this.#loading;
  }

  async #fetch(): Promise<JWTVerifyGetKey> {
    this.#lastFetchAt = Date.now();
    try {
      const res = await fetch(this.url, { headers: { Accept: "application/json" }, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
      if (!res.ok) throw new Error(`it answered ${res.status}`);
      const getKey = createLocalJWKSet((await res.json()) as JSONWebKeySet);
      this.#good = { getKey, fetchedAt: Date.now() };
      return getKey;
    } catch (error) {
      const age = this.#good ? Math.round((Date.now() - this.#good.fetchedAt) / 1000) : null;
      log[age === null ? "error" : "warn"]("JWKS refresh failed", {
        url: this.url,
        last_good_age_s: age,
        error: String(error),
      });
      throw error;
    }
  }
}

const keySets = isolateMap<string, IdpKeySet>();
function keySetFor(url: string): JWTVerifyGetKey {
  let keySet = keySets.get(url);
  if (!keySet) {
    keySet = new IdpKeySet(url);
    keySets.set(url, keySet);
  }
  return keySet.getKey;
}

export const MAX_SUBJECT_LENGTH = 255;
const ALGORITHMS = ["RS256", "PS256", "ES256", "EdDSA"];

const REALM = 'Bearer realm="price-data-api"';

export function unauthorized(detail: string, tokenWasSent: boolean): ApiError {
  const challenge = tokenWasSent ? `${REALM}, error="invalid_token"` : REALM;
  return new ApiError(401, detail, { "WWW-Authenticate": challenge });
}

function explain(error: unknown): ApiError {
  if (error instanceof errors.JWTExpired) return unauthorized("The token has expired; sign in again.", true);
  if (error instanceof errors.JWTClaimValidationFailed) {
    return unauthorized(`The token's "${error.claim}" claim is missing or wrong (${error.reason}); use a token issued for this API.`, true);
  }
  if (error instanceof errors.JOSEAlgNotAllowed) {
    return unauthorized(`The token's algorithm is not accepted; use one of ${ALGORITHMS.join(", ")}.`, true);
  }
  if (error instanceof errors.JWSSignatureVerificationFailed || error instanceof errors.JWKSNoMatchingKey) {
    return unauthorized("The token's signature does not match the identity provider's keys.", true);
  }
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid || error instanceof errors.JOSENotSupported) {
    return unauthorized("The token is not a well-formed signed JWT.", true);
  }
  // Anything else is the key set itself failing to load: our problem, not the caller's token.
  log.error("JWKS unavailable", { error: String(error) });
  return new ApiError(503, "The identity provider's signing keys could not be fetched; try again in a minute.", { "Retry-After": "60" });
}

/** Keys of one algorithm a token without `kid` is tried against: an IdP publishes one or two (mid-rotation), rarely more. */
const MAX_KEYS_TRIED = 5;

/**
 * A token without `kid` whose algorithm several keys of the set share: verified against each (at most MAX_KEYS_TRIED)
 * until one signature matches. A claim that fails after a match fails the token (the key was the right one).
 */
async function verifyWithEachKey(token: string, candidates: errors.JWKSMultipleMatchingKeys, options: JWTVerifyOptions) {
  let tried = 0;
  for await (const key of candidates) {
    try {
      return await jwtVerify(token, key, options);
    } catch (error) {
      if (!(error instanceof errors.JWSSignatureVerificationFailed)) throw error;
    }
    if (++tried === MAX_KEYS_TRIED) break;
  }
  throw new errors.JWSSignatureVerificationFailed();
}

/** IDP_TOKEN_TYPE for an IdP whose access tokens carry no `typ` header. */
const NO_TYPE = "none";

/** A media type's "application/" prefix may be left out, and case does not count (RFC 7515, 4.1.9). */
const mediaType = (typ: string) => typ.toLowerCase().replace(/^application\//, "");
const isTokenType = (typ: string | undefined, wanted: string) =>
  wanted === NO_TYPE ? typ === undefined : typ !== undefined && mediaType(typ) === mediaType(wanted);

export async function verifyIdpToken(token: string, config: Config): Promise<Identity> {
  const options: JWTVerifyOptions = {
    issuer: config.IDP_ISSUER,
    audience: config.IDP_AUDIENCE,
    algorithms: ALGORITHMS,
    clockTolerance: 60,
    requiredClaims: ["iss", "aud", "exp", "sub"],
  };
  try {
    const { payload, protectedHeader } = await jwtVerify(token, keySetFor(config.IDP_JWKS_URL), options).catch((error: unknown) => {
      if (error instanceof errors.JWKSMultipleMatchingKeys) return verifyWithEachKey(token, error, options);
      throw error;
    });
    // Once the signature holds: an ID token (or another JWT the IdP signs) of the same issuer and audience is no access token.
    if (!isTokenType(protectedHeader.typ, config.IDP_TOKEN_TYPE)) {
      const typ = protectedHeader.typ === undefined ? "missing" : JSON.stringify(protectedHeader.typ);
      const wanted = config.IDP_TOKEN_TYPE === NO_TYPE ? "absent" : `"${config.IDP_TOKEN_TYPE}"`;
      throw unauthorized(
        `The token's "typ" header is ${typ}, not ${wanted}: this API takes the identity provider's access tokens only (not ID tokens or other JWTs).`,
        true,
      );
    }
    const sub = payload.sub as unknown;
    if (typeof sub !== "string" || sub === "")
      throw unauthorized('The token\'s "sub" claim must be a non-empty string naming the account.', true);
    if (sub.length > MAX_SUBJECT_LENGTH) throw unauthorized(`The token's "sub" claim is over ${MAX_SUBJECT_LENGTH} characters.`, true);
    const scope = typeof payload.scope === "string" ? payload.scope : "";
    return { sub, scopes: new Set(scope.split(" ").filter(Boolean)) };
  } catch (error) {
    throw error instanceof ApiError ? error : explain(error);
  }
}
