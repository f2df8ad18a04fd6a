import type { Context, MiddlewareHandler } from "hono";
import { admitKey, isSeenKey } from "../api-keys/object/stub.ts";
import type { CheckedAdmission, KeyRequest } from "../api-keys/object/types.ts";
import { keyRefusal } from "../api-keys/refusal.ts";
import { unauthorized } from "../auth/idp.ts";
import { connectorKeyOf, isKnownConnectorToken, isMcpPath, resourceMetadataUrl } from "../connect/server.ts";
import type { AppEnv } from "../http/app-env.ts";
import { ApiError, errorResponse } from "../http/errors.ts";
import { credentialMisfit } from "../operation/guards.ts";
import { declarationOf, type RouteDeclaration } from "../operation/operation.ts";
import type { WorkMeter } from "../platform/metered.ts";
import type { Environment } from "../platform/tables.ts";
import { bucketName, FIXED_BUCKETS } from "../rate-limit/buckets.ts";
import { admitBucket, rememberedRefusal } from "../rate-limit/stub.ts";
import type { Decision } from "../rate-limit/types.ts";
import { admitIp, clientIp, ipBucket, tooMany, withBucketHeaders } from "./client-ip.ts";
import { type Credential, type Identified, identify } from "./identify.ts";

/**
 * What a key's object is asked about a request beyond counting it: the client's address, and what its route declares:
 * the scope, the environment (with the key's own, from its head) and, when this request counts in it, the budget.
 */
function keyRequestOf(c: Context, declared: RouteDeclaration | undefined, key: Environment): KeyRequest {
  if (declared?.credential !== "api-key") return { ip: clientIp(c), scope: undefined };
  const { scope, environment: needed, budget } = declared;
  return {
    ip: clientIp(c),
    scope,
    ...(needed && { environment: { needed, key } }),
    ...(budget?.counts(c) && { budget: { name: budget.name, quota: budget.quota, windowSeconds: budget.windowSeconds } }),
  };
}

/**
 * An OAuth access token of one-click connect (src/connect/) acts as its connector key from here on: the same key object
 * decides it (its limits, its scopes, its revocation, which applies to the very next request). It is for /mcp only, its
 * resource; a token the authorisation server does not know (forged, expired, its grant ended) is refused like a bad key.
 */
async function connectorKey(c: Context<AppEnv>, token: string): Promise<Credential> {
  if (!isMcpPath(c.req.path)) {
    const error = unauthorized("This OAuth access token is for /mcp only; other routes take an API key or an account login.", true);
    return { kind: "rejected", error, wasApiKey: false };
  }
  try {
    const keyHash = await connectorKeyOf(new URL(c.req.url).origin, token, c.var.services.oauthKv);
    if (keyHash !== undefined) return { kind: "api-key", keyHash, environment: "live" };
  } catch (error) {
    if (error instanceof ApiError) return { kind: "rejected", error, wasApiKey: true };
    throw error;
  }
  const detail = "The OAuth access token is unknown, expired or ended; refresh it, or connect the client again.";
  return { kind: "rejected", error: unauthorized(detail, true), wasApiKey: true };
}

async function admitCredential(
  c: Context<AppEnv>,
  identified: Identified,
  declared: RouteDeclaration | undefined,
  work: WorkMeter,
): Promise<[Credential, Decision]> {
  if (identified.kind === "connector-token" && !isKnownConnectorToken(identified.token)) {
    // As for a key hash it has not seen: while the isolate remembers the client IP's refusal, its 429, with no KV read.
    const refused = rememberedRefusal(ipBucket(c));
    if (refused)
      return [{ kind: "rejected", error: unauthorized("The OAuth access token was not checked.", true), wasApiKey: true }, refused];
  }
  const credential = identified.kind === "connector-token" ? await connectorKey(c, identified.token) : identified;
  if (credential.kind === "api-key") {
    // Made-up keys pass the public checksum, so a key costs D1 a lookup only while the client IP's bucket has room;
    // once it is empty, its 429 is the answer. The key's object is asked first, not to look up: a key it has read
    // before (every key after its first request) is decided in that one call. Only a key it has never read
    // ("unchecked") makes the worker look at the IP's bucket, counting nothing there (a request is counted in it only
    // if the key turns out not to work, so a client with many keys loses no IP quota to them), then ask again. A hash
    // this isolate has not seen answered gets a 429 with no call at all while the isolate remembers the IP's refusal.
    const refused = isSeenKey(credential.keyHash) ? undefined : rememberedRefusal(ipBucket(c));
    if (refused) return [credential, refused];
    const request = keyRequestOf(c, declared, credential.environment);
    const asked = await admitKey(c.env, credential.keyHash, work, request, { lookUp: false });
    let outcome: CheckedAdmission;
    if (asked.status === "unchecked") {
      const ip = await admitBucket(c.env, ipBucket(c), FIXED_BUCKETS.ip, work, { count: false });
      if (!ip.allowed) return [credential, ip];
      outcome = await admitKey(c.env, credential.keyHash, work, request, { lookUp: true });
    } else outcome = asked;
    if (outcome.status === "active") {
      const { keyHash, environment } = credential;
      const key = { id: outcome.keyId, accountId: outcome.accountId, environment, scopes: outcome.scopes, keyHash, request };
      return [{ ...credential, key }, outcome.decision];
    }
    // Refused (a key that does not work, or its restrictions): the caller may not be the key's holder, so the client
    // IP's bucket counts it, and its headers are what the caller sees (never the key's quota).
    return [{ kind: "rejected", error: keyRefusal(outcome), wasApiKey: true }, await admitIp(c, work)];
  } else if (credential.kind === "login") {
    // The route's credential names the bucket; a login on a path no route serves counts as the account's.
    const kind = declared?.credential === "admin" ? "admin" : "account";
    return [credential, await admitBucket(c.env, bucketName(kind, credential.identity.sub), FIXED_BUCKETS[kind], work)];
  }
  return [credential, await admitIp(c, work)];
}

/**
 * A secret-scanning report is counted once its route knows who sent it: a report whose signature verifies in the
 * `secret-scanning` bucket (admitVerifiedReport), anything else in the client IP's, so no one but GitHub can use up
 * GitHub's quota. Before the route runs, the client IP's bucket is only looked at (counting nothing): a caller
 * whose bucket is empty gets its 429 before any body is read or signature checked.
 */
async function admitReport(c: Context<AppEnv>, next: () => Promise<void>, work: WorkMeter): Promise<Response> {
  const room = await admitBucket(c.env, ipBucket(c), FIXED_BUCKETS.ip, work, { count: false });
  if (!room.allowed) return withBucketHeaders(c, tooMany(c, room), room, work);
  c.set("credential", { kind: "none" });
  await next();
  const verified = c.get("verifiedReport");
  const decision = verified ?? (await admitIp(c, work));
  return withBucketHeaders(c, verified || decision.allowed ? c.res : tooMany(c, decision), decision, work);
}

/**
 * A credential of a kind the route does not take (a login on a data route, a key on a login route, a token without the
 * route's scope): counted in its own bucket as the rate-limit rules say, but answered by its guard's 401 or 403 even
 * when that bucket is empty, as who you are and what you may do come before your limits. A request with no credential
 * or a bad one is not: the client IP's bucket is the only bound on what an unidentified caller costs, so its 429 stands.
 */
const wrongKind = (declared: RouteDeclaration, credential: Identified) =>
  (credential.kind === "api-key" || credential.kind === "login") && credentialMisfit(declared, credential) !== undefined;

/**
 * Every request passes here after its context is built: its credential picks the bucket, the
 * bucket's object decides, and whatever response follows (success or error) carries that bucket's headers.
 */
export const admission: MiddlewareHandler<AppEnv> = async (c, next) => {
  const { config, work } = c.var.services;
  const declared = declarationOf(c);
  if (declared?.credential === "github") return admitReport(c, next, work);
  const identified = await identify(c.req.header("Authorization"), config, declared?.credential);
  const [credential, decision] = await admitCredential(c, identified, declared, work);
  c.set("credential", credential);
  // Who you are and what you may do are answered here, before the request is read (its query, its size, its body):
  // 401 and 403 before 429 before 413 and 400 (contract, fifth wave: the order of refusals).
  const misfit = declared && credentialMisfit(declared, credential);
  let res: Response;
  if (misfit && (decision.allowed || wrongKind(declared, identified))) {
    res = errorResponse(c, misfit);
  } else if (decision.allowed) {
    await next();
    res = c.res;
  } else {
    res = tooMany(c, decision, declared);
  }
  // MCP's authorisation discovery: a client refused by /mcp is told where to find how to connect (RFC 9728).
  if (res.status === 401 && isMcpPath(c.req.path)) {
    const challenge = res.headers.get("WWW-Authenticate") ?? 'Bearer realm="price-data-api"';
    res.headers.set("WWW-Authenticate", `${challenge}, resource_metadata="${resourceMetadataUrl(new URL(c.req.url).origin)}"`);
  }
  return withBucketHeaders(c, res, decision, work);
};
