import { Buffer } from "node:buffer";
import { secretKeyBytes } from "../secrets.ts";

/**
 * Standard Webhooks signing: `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`,
 * keyed with the secret's decoded bytes. `webhook-id` is the event id (the same on every retry, so
 * receivers can deduplicate); `webhook-timestamp` is this attempt's Unix time in seconds. During a
 * secret rotation's grace, one signature per secret, new first, space-separated (the standard allows several).
 */
export async function signedHeaders(
  secrets: readonly string[],
  { id, timestampSeconds, body }: { id: string; timestampSeconds: number; body: string },
): Promise<Record<string, string>> {
  const content = new TextEncoder().encode(`${id}.${timestampSeconds}.${body}`);
  const signatures = await Promise.all(
    secrets.map(async (secret) => {
      const key = await crypto.subtle.importKey("raw", secretKeyBytes(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
      return `v1,${Buffer.from(await crypto.subtle.sign("HMAC", key, content)).toString("base64")}`;
    }),
  );
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": signatures.join(" "),
  };
}
