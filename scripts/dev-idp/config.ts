import { readFileSync } from "node:fs";
import type { JWK } from "jose";

/** The local IdP's fixed settings, shared by the IdP itself, `npm run token` and `npm run dev`. */
export const DEV_IDP_PORT = 4000;
export const DEV_ISSUER = `http://127.0.0.1:${DEV_IDP_PORT}`;
export const DEV_AUDIENCE = "price-data-api";
export const DEV_WORKER_ORIGIN = "http://127.0.0.1:8787";
export const DASHBOARD_CLIENT_ID = "price-data-dashboard";
export const MACHINE_CLIENT_ID = "price-data-machine";
export const MACHINE_CLIENT_SECRET = "dev-machine-secret-not-for-production";
export const ADMIN_SCOPES = "accounts:write prices:write";
/** Any absolute URI works as the resource indicator; tokens for it carry `aud: DEV_AUDIENCE`. */
export const API_RESOURCE = "urn:price-data-api";

/** The IdP's development signing key (private JWK): the IdP signs with it, `npm run token` and `npm run dev` mint account logins. */
export const devSigningKey = (): JWK => JSON.parse(readFileSync(new URL("./signing-key.json", import.meta.url), "utf8"));
