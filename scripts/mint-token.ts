import { importJWK, type JWK, SignJWT } from "jose";

export interface TokenClaims {
  issuer: string;
  audience: string;
  sub: string;
  scope?: string;
  /** Seconds from now; negative for a token that has already expired. */
  expiresIn?: number;
}

/**
 * The one way this repo mints an IdP-style JWT: the tests sign with their own key pair,
 * `npm run token` with the local IdP's dev key, so both verify against a served JWKS.
 */
export async function mintToken(privateJwk: JWK, claims: TokenClaims): Promise<string> {
  const alg = privateJwk.alg ?? "RS256";
  const now = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT(claims.scope === undefined ? {} : { scope: claims.scope })
    .setProtectedHeader({ alg, kid: privateJwk.kid, typ: "at+jwt" })
    .setIssuer(claims.issuer)
    .setAudience(claims.audience)
    .setSubject(claims.sub)
    .setIssuedAt(now)
    .setExpirationTime(now + (claims.expiresIn ?? 3600));
  return jwt.sign(await importJWK(privateJwk, alg));
}
