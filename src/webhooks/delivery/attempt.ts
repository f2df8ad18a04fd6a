import { deliveryBody, type WebhookEvent } from "../../events/messages.ts";
import { decryptSecret } from "../secrets.ts";
import type { DeliveryRow, WebhookRow } from "../service.ts";
import { responseExcerpt } from "./excerpt.ts";
import { isTermination, MCP_SUBSCRIPTION_HEADER, occurrenceBody, occurrenceMessageId } from "./mcp-occurrence.ts";
import type { NewDelivery } from "./rows.ts";
import { MAX_ATTEMPTS } from "./schedule.ts";
import { signedHeaders } from "./signing.ts";

/**
 * One delivery attempt, made by the queue consumer (src/webhooks/delivery/consumer.ts) for an endpoint that is
 * not failing, and by the webhook's own object (src/webhooks/delivery/endpoint.ts): the webhook's secrets, the
 * signed POST, and the outcome to record.
 */

/** A 2xx within this time is success; the clock starts when the request is sent. */
export const DELIVERY_TIMEOUT_MS = 15_000;
/**
 * The timeout of a probe: an attempt to an endpoint whose last attempt failed (`failing_since` set). Such an
 * endpoint is probed one attempt at a time by its own object (src/webhooks/delivery/endpoint.ts), which a shorter
 * wait frees sooner. Its first success makes it healthy again, with the full 15 s.
 */
export const PROBE_TIMEOUT_MS = 5_000;

export const USER_AGENT = "price-data-api-webhooks/1";

type Outcome = DeliveryRow["outcome"];

/**
 * A 2xx is delivered, a 410 disables; else retried until the last attempt. An MCP subscription's 413 is final at once:
 * the events extension says a body the receiver refuses as too large is not retried.
 */
function outcomeOf(statusCode: number | null, attempt: number, webhook: WebhookRow): Outcome {
  if (statusCode !== null && statusCode >= 200 && statusCode < 300) return "delivered";
  if (statusCode === 410) return "disabled";
  if (statusCode === 413 && webhook.source === "mcp") return "failed";
  return attempt < MAX_ATTEMPTS ? "retrying" : "failed";
}

/** An attempt made and not yet recorded (recordAttempts writes a batch's together). */
export interface Attempted {
  outcome: Outcome;
  record: NewDelivery;
}

/**
 * One attempt: sign and POST. "gone" when the webhook was deleted or disabled since the event (nothing
 * sent). Throws only when the secret fails (the caller retries).
 */
export async function attemptDelivery(
  secretKey: string,
  { webhook, event, attempt }: { webhook: WebhookRow | undefined; event: WebhookEvent; attempt: number },
): Promise<Attempted | "gone"> {
  if (!delivers(webhook, event, attempt)) return "gone";
  const mcp = webhook.source === "mcp";
  const payload = mcp ? occurrenceBody(event) : deliveryBody(event);
  const started = Date.now();
  const secrets = await signingSecrets(secretKey, webhook, started);
  const timestamp = Math.floor(started / 1000);
  const headers = {
    ...(await signedHeaders(secrets, { id: mcp ? occurrenceMessageId(event) : event.id, timestampSeconds: timestamp, body: payload })),
    "content-type": "application/json",
    "user-agent": USER_AGENT,
    ...(mcp ? { [MCP_SUBSCRIPTION_HEADER]: webhook.id } : {}),
  };
  const timeoutMs = webhook.failingSince === null ? DELIVERY_TIMEOUT_MS : PROBE_TIMEOUT_MS;
  return attempted({ webhook, event, attempt, started }, await post(webhook.url, headers, payload, timeoutMs));
}

/**
 * Enabled, and (an MCP subscription) not lapsed: a lapsed subscription delivers nothing, its retries included. A
 * subscription's `terminated` envelope goes to the subscription it disabled, once: the extension asks for an attempt,
 * and a disabled webhook's retries are abandoned (src/webhooks/abandoned-retries.ts).
 */
const delivers = (webhook: WebhookRow | undefined, event: WebhookEvent, attempt: number): webhook is WebhookRow =>
  webhook !== undefined &&
  (webhook.status === "enabled" || (webhook.source === "mcp" && isTermination(event) && attempt === 1)) &&
  (webhook.expiresAt === null || Date.parse(webhook.expiresAt) > Date.now());

/** Why an attempt was not sent: src/webhooks/delivery/endpoint.ts sends one probe at a time to a failing endpoint. */
export const NOT_SENT_WHILE_FAILING = "Not sent: the endpoint is failing, and the probe just before got no answer.";

/**
 * An attempt not sent, because the probe just before got no answer: recorded and retried on the schedule like a
 * failure, so the delivery keeps its place in it. "gone" as for attemptDelivery.
 */
export function attemptNotSent({
  webhook,
  event,
  attempt,
}: {
  webhook: WebhookRow | undefined;
  event: WebhookEvent;
  attempt: number;
}): Attempted | "gone" {
  if (!delivers(webhook, event, attempt)) return "gone";
  return attempted({ webhook, event, attempt, started: Date.now() }, { statusCode: null, error: NOT_SENT_WHILE_FAILING, excerpt: null });
}

function attempted(
  { webhook, event, attempt, started }: { webhook: WebhookRow; event: WebhookEvent; attempt: number; started: number },
  { statusCode, error, excerpt }: PostResult,
): Attempted {
  const outcome = outcomeOf(statusCode, attempt, webhook);
  return {
    outcome,
    record: {
      eventId: event.id,
      webhookId: webhook.id,
      type: event.type,
      attempt,
      statusCode,
      error,
      durationMs: Date.now() - started,
      outcome,
      deliveredAt: new Date(started).toISOString(),
      responseExcerpt: excerpt,
    },
  };
}

/** The current secret, then the previous one while a rotation's grace lasts (src/webhooks/rotation.ts). */
async function signingSecrets(secretKey: string, webhook: WebhookRow, now: number): Promise<string[]> {
  const secrets = [await decryptSecret(secretKey, { webhookId: webhook.id, stored: webhook.secretCiphertext })];
  if (webhook.previousSecretCiphertext && webhook.previousSecretExpiresAt && Date.parse(webhook.previousSecretExpiresAt) > now) {
    secrets.push(await decryptSecret(secretKey, { webhookId: webhook.id, stored: webhook.previousSecretCiphertext }));
  }
  return secrets;
}

interface PostResult {
  statusCode: number | null;
  error: string | null;
  excerpt: string | null;
}

async function post(url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<PostResult> {
  try {
    const res = await fetch(url, { method: "POST", headers, body, redirect: "manual", signal: AbortSignal.timeout(timeoutMs) });
    const excerpt = await responseExcerpt(res).catch(() => null); // a body cut short does not change the status
    return { statusCode: res.status, error: res.ok ? null : `The endpoint answered ${res.status}.`, excerpt };
  } catch (error) {
    if (error instanceof Error && error.name === "TimeoutError")
      return { statusCode: null, error: `No response within ${timeoutMs / 1000} s.`, excerpt: null };
    const reason = error instanceof Error ? error.message : String(error);
    // workerd says "internal error; reference = …" for a host it cannot resolve or connect to: nothing a reader can act on.
    const said = /^internal error/i.test(reason) ? "" : ` (${reason.replace(/\.$/, "")})`;
    return { statusCode: null, error: `Could not reach the host ${new URL(url).host}${said}.`, excerpt: null };
  }
}
