import { env } from "cloudflare:workers";
import { importJWK, type JWTPayload, SignJWT } from "jose";
import { mintToken, type TokenClaims } from "../../scripts/mint-token.ts";

export const TEST_ISSUER = env.IDP_ISSUER!;
export const TEST_AUDIENCE = env.IDP_AUDIENCE!;
export const signingJwk = JSON.parse(env.TEST_SIGNING_JWK);
export const publicJwk = JSON.parse(env.TEST_PUBLIC_JWK);

type Overrides = Partial<TokenClaims>;

/** An account-login JWT signed by the test IdP. */
export const accountToken = (sub: string, overrides: Overrides = {}) =>
  mintToken(signingJwk, { issuer: TEST_ISSUER, audience: TEST_AUDIENCE, sub, ...overrides });

/** The subject of an admin login unless a test names another. */
export const ADMIN_SUBJECT = "admin-user";
/** An admin JWT holding the given scopes (both admin scopes by default). */
export const adminToken = (sub = ADMIN_SUBJECT, scope = "accounts:write prices:write") =>
  mintToken(signingJwk, { issuer: TEST_ISSUER, audience: TEST_AUDIENCE, sub, scope });

export const nowSeconds = () => Math.floor(Date.now() / 1000);

/** The claims of a valid account-login token for `sub`, expiring in an hour; spread and override to forge. */
export const validClaims = (sub: string): JWTPayload => {
  const now = nowSeconds();
  return { iss: TEST_ISSUER, aud: TEST_AUDIENCE, sub, iat: now, exp: now + 3600 };
};

export interface SignOptions {
  /** The `alg` header; RS256 by default. */
  alg?: string;
  /** The signing key; the test IdP's private key by default. */
  key?: CryptoKey | Uint8Array;
  /** The `kid` header; the test IdP's kid by default. */
  kid?: string;
  /** The `typ` header; an access token's (RFC 9068) by default, none when null. */
  typ?: string | null;
}

/**
 * Signs exactly the given claims (nothing added, so a claim can be left out), for the forged and
 * malformed tokens `mintToken` cannot express.
 */
export async function signClaims(
  claims: JWTPayload,
  { alg = "RS256", key, kid = signingJwk.kid, typ = "at+jwt" }: SignOptions = {},
): Promise<string> {
  const signingKey = key ?? (await importJWK(signingJwk, "RS256"));
  return new SignJWT(claims).setProtectedHeader({ alg, kid, ...(typ === null ? {} : { typ }) }).sign(signingKey);
}
