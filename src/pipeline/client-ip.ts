import type { Context } from "hono";
import type { AppEnv } from "../http/app-env.ts";
import { ApiError, errorResponse } from "../http/errors.ts";
import type { RouteDeclaration } from "../operation/operation.ts";
import type { WorkMeter } from "../platform/metered.ts";
import { FIXED_BUCKETS, ipBucketName } from "../rate-limit/buckets.ts";
import { rateLimitRefusal, setRateLimitHeaders } from "../rate-limit/headers.ts";
import { admitBucket } from "../rate-limit/stub.ts";
import type { Decision } from "../rate-limit/types.ts";
import type { Credential } from "./identify.ts";

/**
 * The client IP's bucket, which counts every request that cannot be identified, and the headers and 429 every answer
 * carries: admission's (src/pipeline/admission.ts), and a misconfigured worker's before any request is identified.
 */

export const clientIp = (c: Context) => c.req.header("CF-Connecting-IP") ?? "unknown";
export const ipBucket = (c: Context) => ipBucketName(clientIp(c));
export const admitIp = (c: Context<AppEnv>, work: WorkMeter) => admitBucket(c.env, ipBucket(c), FIXED_BUCKETS.ip, work);

/**
 * Whatever the response, it carries the bucket's headers (and, when asked for, what the request cost: X-Work-Counts,
 * whose `final=0` says its body or its work after the answer can still add to it).
 */
export function withBucketHeaders(c: Context<AppEnv>, res: Response, decision: Decision, work: WorkMeter): Response {
  setRateLimitHeaders(res.headers, decision);
  if (c.env.EXPOSE_WORK_COUNTS === "true") res.headers.set("X-Work-Counts", work.header());
  return res;
}

export const tooMany = (c: Context<AppEnv>, decision: Decision, declared?: RouteDeclaration) => {
  const covers = declared?.credential === "api-key" ? declared.budget?.covers : undefined;
  const credential = c.get("credential") as Credential | undefined; // unset when a misconfigured worker refuses
  const keyEnvironment = credential?.kind === "api-key" ? credential.key?.environment : undefined;
  const { detail, help } = rateLimitRefusal(decision, { covers, keyEnvironment });
  return errorResponse(c, new ApiError(429, detail, {}, help));
};

/** A misconfigured worker's 500, counted in the client IP's bucket like any request that cannot be identified. */
export async function refuseMisconfigured(c: Context<AppEnv>, work: WorkMeter, problem: string): Promise<Response> {
  const decision = await admitIp(c, work);
  const res = decision.allowed ? errorResponse(c, new ApiError(500, problem)) : tooMany(c, decision);
  return withBucketHeaders(c, res, decision, work);
}
