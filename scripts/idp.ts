/**
 * A real OpenID Provider for local development (panva's oidc-provider), on http://127.0.0.1:4000.
 * - `price-data-dashboard`: public client, authorization code + PKCE, for the dashboard.
 * - `price-data-machine`: confidential client, client credentials, holding both admin scopes.
 * Access tokens are RS256 JWTs for the API (aud "price-data-api"), signed with the committed
 * development key, so tokens and jose's cached JWKS stay valid across restarts.
 * Logins use the provider's development pages: any login name and password are accepted.
 * IDP_TOKEN_ON_SECOND_ORIGIN=true (the browser test): the same provider also listens on a second,
 * free port, and the discovery document names the token endpoint there, so the token request goes to
 * another origin than the issuer's, as with Cognito or Google.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import Provider from "oidc-provider";
import {
  ADMIN_SCOPES,
  API_RESOURCE,
  DASHBOARD_CLIENT_ID,
  DEV_AUDIENCE,
  DEV_IDP_PORT,
  DEV_ISSUER,
  DEV_WORKER_ORIGIN,
  devSigningKey,
  MACHINE_CLIENT_ID,
  MACHINE_CLIENT_SECRET,
} from "./dev-idp/config.ts";

const signingKey = devSigningKey();

// oidc-provider warns about the defaults a production provider must replace (its in-memory store, its development
// login pages): here they are the point, so its warnings and notices would only alarm whoever runs `npm run dev`.
for (const level of ["warn", "info"] as const) {
  const print = console[level].bind(console);
  console[level] = (...args: unknown[]) => {
    if (typeof args[0] === "string" && args[0].includes("oidc-provider ")) return;
    print(...args);
  };
}

const provider = new Provider(DEV_ISSUER, {
  clients: [
    {
      client_id: DASHBOARD_CLIENT_ID,
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code"],
      response_types: ["code"],
      redirect_uris: [`${DEV_WORKER_ORIGIN}/dashboard/callback`, "http://localhost:8787/dashboard/callback"],
      post_logout_redirect_uris: [`${DEV_WORKER_ORIGIN}/dashboard/`, "http://localhost:8787/dashboard/"],
    },
    {
      client_id: MACHINE_CLIENT_ID,
      client_secret: MACHINE_CLIENT_SECRET,
      grant_types: ["client_credentials"],
      response_types: [],
      redirect_uris: [],
      scope: ADMIN_SCOPES,
    },
  ],
  jwks: { keys: [signingKey] },
  scopes: ["openid", "profile", ...ADMIN_SCOPES.split(" ")],
  claims: { openid: ["sub"], profile: ["name"] },
  findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id, name: id }) }),
  ttl: {
    ClientCredentials: 3600,
    AccessToken: 3600,
    Session: 8 * 3600,
    Grant: 8 * 3600,
    Interaction: 3600,
    AuthorizationCode: 60,
    IdToken: 3600,
  },
  cookies: { keys: ["local-development-only"] },
  clientBasedCORS: (_ctx, origin) => origin === DEV_WORKER_ORIGIN || origin === "http://localhost:8787",
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => API_RESOURCE,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => {
        if (resource !== API_RESOURCE) throw new Error(`unknown resource ${resource}`);
        return {
          audience: DEV_AUDIENCE,
          scope: ADMIN_SCOPES,
          accessTokenFormat: "jwt",
          accessTokenTTL: 3600,
          jwt: { sign: { alg: "RS256" } },
        };
      },
    },
  },
  // The dashboard asks for no admin scope; the machine client gets what it asks of ADMIN_SCOPES.
  loadExistingGrant: async (ctx) => {
    const grantId = ctx.oidc.result?.consent?.grantId ?? ctx.oidc.session?.grantIdFor(ctx.oidc.client!.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client!.clientId, accountId: ctx.oidc.session!.accountId! });
    grant.addOIDCScope("openid profile");
    grant.addResourceScope(API_RESOURCE, "");
    await grant.save();
    return grant;
  },
});

if (process.env.IDP_TOKEN_ON_SECOND_ORIGIN === "true") {
  const second = createServer(provider.callback());
  await new Promise<void>((resolve) => second.listen(0, "127.0.0.1", resolve));
  const tokenEndpoint = `http://127.0.0.1:${(second.address() as AddressInfo).port}/token`;
  // After the provider writes its discovery document, point its token endpoint at the second origin.
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path === "/.well-known/openid-configuration" && ctx.body && typeof ctx.body === "object")
      Object.assign(ctx.body, { token_endpoint: tokenEndpoint });
  });
  console.log(`Token endpoint on a second origin: ${tokenEndpoint}`);
}

provider.listen(DEV_IDP_PORT, "127.0.0.1", () => {
  console.log(`Local IdP: ${DEV_ISSUER} (discovery at ${DEV_ISSUER}/.well-known/openid-configuration)`);
});
