/**
 * Prints a JWT for the local IdP, for curl:
 *   npm run token -- <account>   an account login for that account (the JWT's `sub`)
 *   npm run token -- --admin     an admin token holding accounts:write and prices:write
 * The admin token comes from the running local IdP (client credentials of the machine client).
 * The account token is signed here with the IdP's own development key, so the worker verifies it
 * against the IdP's JWKS exactly like a token from the login page, without a browser round trip.
 */

import {
  ADMIN_SCOPES,
  API_RESOURCE,
  DEV_AUDIENCE,
  DEV_ISSUER,
  devSigningKey,
  MACHINE_CLIENT_ID,
  MACHINE_CLIENT_SECRET,
} from "./dev-idp/config.ts";
import { mintToken } from "./mint-token.ts";

const arg = process.argv[2];
if (!arg || arg === "--help") {
  console.error("usage: npm run token -- <account>   |   npm run token -- --admin");
  process.exit(2);
}

if (arg === "--admin") {
  const res = await fetch(`${DEV_ISSUER}/token`, {
    method: "POST",
    headers: { Authorization: `Basic ${btoa(`${MACHINE_CLIENT_ID}:${MACHINE_CLIENT_SECRET}`)}` },
    body: new URLSearchParams({ grant_type: "client_credentials", scope: ADMIN_SCOPES, resource: API_RESOURCE }),
  }).catch(() => {
    console.error(`The local IdP does not answer at ${DEV_ISSUER}; start it with \`npm run dev\` (or \`npm run idp\`).`);
    process.exit(1);
  });
  const body = (await res.json()) as { access_token?: string };
  if (!body.access_token) {
    console.error(`The IdP refused: ${JSON.stringify(body)}`);
    process.exit(1);
  }
  console.log(body.access_token);
} else {
  console.log(await mintToken(devSigningKey(), { issuer: DEV_ISSUER, audience: DEV_AUDIENCE, sub: arg }));
}
