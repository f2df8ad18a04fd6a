import { env } from "cloudflare:workers";
import { mintToken, type TokenClaims } from "../../scripts/mint-token.ts";

export const TEST_ISSUER = env.IDP_ISSUER!;
export const TEST_AUDIENCE = env.IDP_AUDIENCE!;
export const signingJwk = JSON.parse(env.TEST_SIGNING_JWK);
export const publicJwk = JSON.parse(env.TEST_PUBLIC_JWK);

type Overrides = Partial<TokenClaims>;

/** An account-login JWT signed by the test IdP. */
export const accountToken = (sub: string, overrides: Overrides = {}) =>
  mintToken(signingJwk, { issuer: TEST_ISSUER, audience: TEST_AUDIENCE, sub, ...overrides });

/** An admin JWT holding the given scopes (both admin scopes by default). */
export const adminToken = (sub = "admin-user", scope = "accounts:write prices:write") =>
  mintToken(signingJwk, { issuer: TEST_ISSUER, audience: TEST_AUDIENCE, sub, scope });
