import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env.ts";
import { identify, type Credential } from "../auth/credentials.ts";
import { unauthorized } from "../auth/idp.ts";
import { readConfig } from "../env.ts";
import { ApiError, errorResponse } from "../errors.ts";
import { bucketName, FIXED_BUCKETS } from "./buckets.ts";
import { admitBucket, admitKey, type Work } from "./client.ts";
import { rateLimitDetail, rateLimitHeaders } from "./headers.ts";
import type { Decision } from "./window.ts";

const clientIp = (c: Context) => c.req.header("CF-Connecting-IP") ?? "unknown";

async function admitCredential(c: Context<AppEnv>, credential: Credential, work: Work): Promise<[Credential, Decision]> {
  if (credential.kind === "api-key") {
    const outcome = await admitKey(c.env, credential.keyHash, work);
    if (outcome.status === "active") return [{ ...credential, key: outcome.key }, outcome.decision];
    const detail = outcome.status === "revoked" ? "This API key has been revoked; create a new one." : "This API key is not recognised.";
    credential = { kind: "rejected", error: unauthorized(detail, true), wasApiKey: true };
  } else if (credential.kind === "login") {
    const kind = c.req.path.startsWith("/admin/") ? "admin" : "account";
    return [credential, await admitBucket(c.env, bucketName(kind, credential.identity.sub), FIXED_BUCKETS[kind], work)];
  }
  return [credential, await admitBucket(c.env, bucketName("ip", clientIp(c)), FIXED_BUCKETS.ip, work)];
}

/**
 * Every request passes here first: its credential picks the bucket, the bucket's object decides,
 * and whatever response follows (success or error) carries that bucket's headers.
 */
export const admission: MiddlewareHandler<AppEnv> = async (c, next) => {
  const work: Work = { d1: 0, keyObjectCalls: 0, otherObjectCalls: 0 };
  c.set("work", work);
  const config = readConfig(c.env);
  const [credential, decision] = await admitCredential(
    c,
    await identify(c.req.header("Authorization"), typeof config === "string" ? undefined : config),
    work,
  );
  c.set("credential", credential);
  let res: Response;
  if (decision.allowed) {
    await next();
    res = c.res;
  } else {
    res = errorResponse(c, new ApiError(429, rateLimitDetail(decision)));
  }
  for (const [name, value] of Object.entries(rateLimitHeaders(decision))) res.headers.set(name, value);
  if (c.env.EXPOSE_WORK_COUNTS === "true") res.headers.set("X-Work-Counts", `d1=${work.d1}; key-do=${work.keyObjectCalls}; other-do=${work.otherObjectCalls}`);
  return res;
};
