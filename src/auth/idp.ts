import { createRemoteJWKSet, errors, jwtVerify, type JWTVerifyGetKey } from "jose";
import { ApiError } from "../http/errors.ts";
import type { Config } from "../platform/config.ts";

/** What a verified account-login or admin JWT tells us. */
export interface Identity {
  sub: string;
  scopes: ReadonlySet<string>;
}

// One key set per URL for the isolate's life: jose caches the keys and refetches only on an unknown `kid`.
const keySets = new Map<string, JWTVerifyGetKey>();
function keySetFor(url: string): JWTVerifyGetKey {
  let keySet = keySets.get(url);
  if (!keySet) {
    keySet = createRemoteJWKSet(new URL(url));
    keySets.set(url, keySet);
  }
  return keySet;
}

export const MAX_SUBJECT_LENGTH = 255;
const ALGORITHMS = ["RS256", "PS256", "ES256", "EdDSA"];

export const REALM = 'Bearer realm="price-data-api"';

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
  console.error(JSON.stringify({ level: "error", message: "JWKS unavailable", error: String(error) }));
  return new ApiError(503, "The identity provider's signing keys could not be fetched; try again in a minute.", { "Retry-After": "60" });
}

export async function verifyIdpToken(token: string, config: Config): Promise<Identity> {
  try {
    const { payload } = await jwtVerify(token, keySetFor(config.IDP_JWKS_URL), {
      issuer: config.IDP_ISSUER,
      audience: config.IDP_AUDIENCE,
      algorithms: ALGORITHMS,
      clockTolerance: 60,
      requiredClaims: ["iss", "aud", "exp", "sub"],
    });
    const sub = payload.sub as unknown;
    if (typeof sub !== "string" || sub === "") throw unauthorized('The token\'s "sub" claim must be a non-empty string naming the account.', true);
    if (sub.length > MAX_SUBJECT_LENGTH) throw unauthorized(`The token's "sub" claim is over ${MAX_SUBJECT_LENGTH} characters.`, true);
    const scope = typeof payload.scope === "string" ? payload.scope : "";
    return { sub, scopes: new Set(scope.split(" ").filter(Boolean)) };
  } catch (error) {
    throw error instanceof ApiError ? error : explain(error);
  }
}
