import { AwsClient } from "aws4fetch";

/**
 * Where an export's files go: the service's own bucket (R2, binding EXPORTS, under exports/<account>/<export>/) or the
 * customer's S3-compatible bucket (under <prefix><export>/), signed with SigV4 by aws4fetch (docs/dependencies.md).
 */

export interface S3Destination {
  type: "s3";
  endpoint: string;
  bucket: string;
  prefix: string;
  region: string;
  access_key_id: string;
}

export interface FileSink {
  /** Where the export's files are, as GET /exports/:id shows it. */
  prefix: string;
  put(path: string, body: Uint8Array, contentType: string): Promise<void>;
}

export const ownPrefix = (accountId: string, exportId: string) => `exports/${accountId}/${exportId}/`;
export const s3Prefix = (destination: S3Destination, exportId: string) => `${destination.prefix}${exportId}/`;

export function r2Sink(bucket: R2Bucket, prefix: string): FileSink {
  return {
    prefix,
    put: async (path, body, contentType) => {
      await bucket.put(prefix + path, body, { httpMetadata: { contentType } });
    },
  };
}

/** An outbound PUT a failing bucket answers in time or not at all: 30 s, then the step fails and its alarm retries. */
const S3_TIMEOUT_MS = 30_000;

export function s3Sink(destination: S3Destination, secretAccessKey: string, exportId: string): FileSink {
  // No retries inside a step: the step's own retry (its alarm) resumes from the same cursor.
  const client = new AwsClient({
    accessKeyId: destination.access_key_id,
    secretAccessKey,
    service: "s3",
    region: destination.region,
    retries: 0,
  });
  const prefix = s3Prefix(destination, exportId);
  const base = destination.endpoint.replace(/\/+$/, "");
  return {
    prefix,
    put: async (path, body, contentType) => {
      const key = (prefix + path).split("/").map(encodeURIComponent).join("/");
      const response = await client.fetch(`${base}/${destination.bucket}/${key}`, {
        method: "PUT",
        body,
        headers: { "Content-Type": contentType },
        signal: AbortSignal.timeout(S3_TIMEOUT_MS),
      });
      if (!response.ok) {
        const text = (await response.text()).slice(0, 200);
        throw new Error(`The bucket answered ${response.status} to the upload of ${path}: ${text}`);
      }
      await response.body?.cancel();
    },
  };
}
