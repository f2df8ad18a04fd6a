import { createRoute } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { AppEnv } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import { jsonBody, jsonResponse, openApiApp } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { operation } from "../operation/operation.ts";
import { bucketName, FIXED_BUCKETS } from "../rate-limit/buckets.ts";
import { rateLimitRefusal } from "../rate-limit/headers.ts";
import { admitBucket } from "../rate-limit/stub.ts";
import { KeyListUnavailable, publicKey } from "./public-keys.ts";
import {
  IDENTIFIER_HEADER,
  MAX_REPORT_BYTES,
  SecretScanningFeedback,
  SIGNATURE_HEADER,
  secretScanningReport,
  signatureHeaders,
} from "./schema.ts";
import { reportLeakedTokens } from "./service.ts";
import { verifyReportSignature } from "./signature.ts";

const unsigned = (detail: string) => new ApiError(401, detail);

/** First of all, before the body limit (which buffers a body sent without Content-Length): an unsigned body is never read. */
const signatureHeadersSent: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (!c.req.header(IDENTIFIER_HEADER) || !c.req.header(SIGNATURE_HEADER))
    throw unsigned(`Send the report signed: the ${IDENTIFIER_HEADER} and ${SIGNATURE_HEADER} headers are required.`);
  await next();
};

/**
 * Nothing of the report is read before its signature verifies over the raw bytes, so an unsigned caller
 * learns nothing about any token, and a changed byte is a 401. The bytes stay cached for the body's parse.
 * Only then is the report counted in GitHub's own bucket (anything refused here counts in the client IP's).
 */
const verifiedByGitHub: MiddlewareHandler<AppEnv> = async (c, next) => {
  const identifier = c.req.header(IDENTIFIER_HEADER)!;
  const signature = c.req.header(SIGNATURE_HEADER)!;
  let key: CryptoKey | undefined;
  try {
    key = await publicKey(c.var.services.config.SECRET_SCANNING_KEYS_URL, identifier);
  } catch (error) {
    if (error instanceof KeyListUnavailable)
      throw new ApiError(503, "GitHub's secret-scanning public keys could not be fetched; send the report again later.", {
        "Retry-After": "60",
      });
    throw error;
  }
  if (!key) throw unsigned(`${IDENTIFIER_HEADER} names no key in GitHub's secret-scanning key list.`);
  if (!(await verifyReportSignature(key, signature, await c.req.arrayBuffer()))) {
    throw unsigned(`${SIGNATURE_HEADER} is not a valid signature of this body by the key ${IDENTIFIER_HEADER} names.`);
  }
  await admitVerifiedReport(c);
  await next();
};

/** Counts a report whose signature verified in the `secret-scanning` bucket; a refusal is a 429 (thrown). */
async function admitVerifiedReport(c: Context<AppEnv>): Promise<void> {
  const decision = await admitBucket(c.env, bucketName("secret-scanning", "github"), FIXED_BUCKETS["secret-scanning"], c.var.services.work);
  c.set("verifiedReport", decision);
  if (!decision.allowed) {
    const { detail, help } = rateLimitRefusal(decision);
    throw new ApiError(429, detail, {}, help);
  }
}

const reportLimit = bodyLimit({
  maxSize: MAX_REPORT_BYTES,
  onError: () => {
    throw new ApiError(413, `The report is over ${MAX_REPORT_BYTES / 1024 / 1024} MiB; send it in parts.`);
  },
});

const reportLeakedTokensRoute = createRoute(
  operation({
    tags: ["Secret scanning"],
    credential: "github",
    ownBodyLimit: true,
    middleware: [signatureHeadersSent, reportLimit, verifiedByGitHub],
    method: "post",
    path: "/github",
    operationId: "reportLeakedTokens",
    summary: "GitHub's secret-scanning partner endpoint: leaked keys are revoked",
    description:
      "GitHub posts the strings it found in public that match our key format (docs/key-format.md), signed with ECDSA P-256 / SHA-256 " +
      "over the raw body by a key from SECRET_SCANNING_KEYS_URL. A missing or bad signature, or an unknown key identifier, is 401 and " +
      "changes nothing, and is counted in the client IP's bucket (30 a minute); only a report whose signature verifies counts in " +
      "its own bucket, 600 a minute. Every live key reported is revoked before the answer (refused on its next request), " +
      "recorded as leaked with where it was found, and its account gets an `api_key.leaked` event. The answer labels each " +
      "token: true_positive when it is or was one of our keys. Reporting a token again changes nothing.",
    request: {
      headers: signatureHeaders,
      query: noQuery,
      body: jsonBody(
        secretScanningReport,
        `The tokens found (at least 10,000 a report are taken; the body may be up to ${MAX_REPORT_BYTES / 1024 / 1024} MiB)`,
      ),
    },
    responses: { 200: jsonResponse("One label per reported token, in the report's order", SecretScanningFeedback) },
  }),
);

/** POST /secret-scanning/github (signed by GitHub; no Authorization). */
export const secretScanningRoutes = openApiApp().openapi(reportLeakedTokensRoute, async (c) =>
  c.json(await reportLeakedTokens(c.var.services, c.req.valid("json")), 200),
);
