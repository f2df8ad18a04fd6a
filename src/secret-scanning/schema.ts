import { z } from "zod";
import { required } from "../http/validation.ts";

/** The wire shapes of GitHub's secret-scanning partner endpoint, as GitHub documents them. */

/** Reports of at least 10,000 tokens are taken (the contract); the body limit is what bounds them. */
export const MAX_REPORT_BYTES = 16 * 1024 * 1024;

export const SIGNATURE_HEADER = "Github-Public-Key-Signature";
export const IDENTIFIER_HEADER = "Github-Public-Key-Identifier";

/** GitHub may add fields; only `token` and `type` are needed to answer. */
const ReportedToken = z.object({
  token: z.string({ error: required("string") }).meta({ description: "The string GitHub found" }),
  type: z.string({ error: required("string") }).meta({ description: "The token type GitHub matched", example: "price_data_api_key" }),
  url: z.string().nullish().meta({
    description: "Where it was found",
    example: "https://github.com/octocat/Hello-World/blob/12345600b9cbe38a219f39a9941c9319b600c002/foo/bar.txt",
  }),
  source: z
    .string()
    .nullish()
    .meta({ description: "What GitHub scanned: content, commit, pull_request, gist, npm, …", example: "content" }),
});
export type ReportedToken = z.infer<typeof ReportedToken>;

export const secretScanningReport = z
  .array(ReportedToken, { error: required("array") })
  .meta({ description: "The tokens GitHub found, one entry per occurrence" });

export const signatureHeaders = z.object({
  [IDENTIFIER_HEADER.toLowerCase()]: z
    .string()
    .meta({ description: "Names the key (in SECRET_SCANNING_KEYS_URL's list) that signed the body" }),
  [SIGNATURE_HEADER.toLowerCase()]: z.string().meta({ description: "Base64 of the DER ECDSA P-256 SHA-256 signature of the raw body" }),
});

export const TokenFeedback = z
  .object({
    token_hash: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .meta({ description: "Hex SHA-256 of the reported token" }),
    token_type: z.string().meta({ description: "The reported `type`" }),
    label: z.enum(["true_positive", "false_positive"]).meta({ description: "true_positive: the token is or was one of our API keys" }),
  })
  .meta({ id: "SecretScanningFeedback" });
export type TokenFeedback = z.infer<typeof TokenFeedback>;

export const SecretScanningFeedback = z.array(TokenFeedback).meta({ description: "One entry per reported token, in the report's order" });
