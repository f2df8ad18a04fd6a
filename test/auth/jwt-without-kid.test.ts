import { env } from "cloudflare:workers";
import { importJWK, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { verifyIdpToken } from "../../src/auth/idp.ts";
import { ApiError } from "../../src/http/errors.ts";
import { type Config, readConfig } from "../../src/platform/config.ts";
import { signingJwk, validClaims } from "../helpers/tokens.ts";

/** An IdP whose key set holds two RS256 keys (test/helpers/idp-server.ts): the test IdP's signing key is the second. */
const config = { ...(readConfig(env) as Config), IDP_JWKS_URL: new URL("/two-keys/jwks.json", env.IDP_JWKS_URL).href };

/** A token with no `kid` in its header, as some IdPs issue them. */
async function withoutKid(sub: string, key?: CryptoKey) {
  return new SignJWT(validClaims(sub))
    .setProtectedHeader({ alg: "RS256", typ: "at+jwt" })
    .sign(key ?? (await importJWK(signingJwk, "RS256")));
}

const outcome = (token: string) =>
  verifyIdpToken(token, config).then(
    (identity) => identity.sub,
    (error: unknown) => (error instanceof ApiError ? error.status : error),
  );

describe("a JWT without kid, when the key set holds several keys of its algorithm", () => {
  it("is tried against each: signed by one of them, it passes", async () => {
    expect(await outcome(await withoutKid("no-kid"))).toBe("no-kid");
  });

  it("signed by none of them, it is 401, never 503", async () => {
    const stranger = await crypto.subtle.generateKey(
      { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
      false,
      ["sign", "verify"],
    );
    expect(await outcome(await withoutKid("stranger", (stranger as CryptoKeyPair).privateKey))).toBe(401);
  });

  it("with claims that do not hold, it is 401 whichever key signed it", async () => {
    const expired = await new SignJWT({ ...validClaims("late"), exp: Math.floor(Date.now() / 1000) - 3600 })
      .setProtectedHeader({ alg: "RS256", typ: "at+jwt" })
      .sign(await importJWK(signingJwk, "RS256"));
    expect(await outcome(expired)).toBe(401);
  });
});
