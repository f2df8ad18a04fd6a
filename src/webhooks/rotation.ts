import { and, eq } from "drizzle-orm";
import type { RequestServices } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import { webhooks } from "../platform/tables.ts";
import type { CreatedWebhookView } from "./schema.ts";
import { encryptSecret, generateWebhookSecret } from "./secrets.ts";
import { findAccountWebhook, type WebhookOfAccount, webhookView } from "./service.ts";

/**
 * A new secret, shown in this answer only. The previous one is kept (encrypted like the current one)
 * until the grace ends; until then deliveries carry both signatures (src/webhooks/delivery/consumer.ts).
 * The write holds only if the secret is still the one read: of two concurrent calls one wins and the
 * other answers 409, so the previous secret kept is always the one shown just before (never one no call replaced).
 */
export async function rotateWebhookSecret(
  { db, config }: Pick<RequestServices, "db" | "config">,
  { accountId, id, graceSeconds }: WebhookOfAccount & { graceSeconds: number },
): Promise<CreatedWebhookView> {
  const current = await findAccountWebhook(db, { accountId, id });
  // An MCP subscription's secret is its client's (the events extension: the server never makes one); a refresh replaces it.
  if (current.source === "mcp")
    throw new ApiError(
      409,
      `${id} is an MCP events subscription: its secret is its client's own; the client rotates it by subscribing again with a new one.`,
    );
  const secret = generateWebhookSecret();
  const [row] = await db
    .update(webhooks)
    .set({
      secretCiphertext: await encryptSecret(config.WEBHOOK_SECRET_KEY, { webhookId: id, secret }),
      previousSecretCiphertext: graceSeconds > 0 ? current.secretCiphertext : null,
      previousSecretExpiresAt: graceSeconds > 0 ? new Date(Date.now() + graceSeconds * 1000).toISOString() : null,
    })
    .where(and(eq(webhooks.id, id), eq(webhooks.accountId, accountId), eq(webhooks.secretCiphertext, current.secretCiphertext)))
    .returning();
  if (!row) {
    await findAccountWebhook(db, { accountId, id }); // deleted meanwhile: 404
    throw new ApiError(
      409,
      `Another rotation of webhook ${id}'s secret took effect while this one ran; the secret that call showed is the ` +
        `one in use. Rotate again if you need a new one.`,
    );
  }
  return { ...webhookView(row), secret };
}
