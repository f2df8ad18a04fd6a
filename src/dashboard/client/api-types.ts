/**
 * Wire shapes of the second-wave routes (key expiry and rotation, usage, webhook management), written
 * from /work/shared/contract.md "Second wave" because the routes are being built alongside this page.
 * Once they land, these are replaced by the generated client's types (client/schema.d.ts, via
 * `npm run client:generate`) and this module goes away. Everything else comes from the generated client.
 */
import type { components } from "../../../client/schema.d.ts";

type Schemas = components["schemas"];

/** A key record: `status` gains "expired"; expiry and rotation links are null when none. */
export type ApiKey = Omit<Schemas["ApiKey"], "status"> & {
  status: "active" | "expired" | "revoked";
  expires_at: string | null;
  rotated_from: string | null;
  rotated_to: string | null;
};

/** POST /api-keys and POST /api-keys/:id/rotate: the record plus the full key, shown once. */
export type CreatedApiKey = ApiKey & { key: string };

export type Granularity = "minute" | "hour" | "day";

export interface UsageBucket {
  start: string;
  admitted: number;
  refused: number;
}

/** GET /api-keys/:id/usage (with key_id) and GET /account/usage. */
export interface Usage {
  key_id?: string;
  granularity: Granularity;
  buckets: UsageBucket[];
}

/** PATCH /webhooks/:id; every field optional. */
export interface WebhookPatch {
  url?: string;
  events?: Schemas["Webhook"]["events"];
  min_change_pct?: number;
  description?: string;
  status?: "enabled" | "disabled";
}

/** POST /webhooks/:id/rotate-secret: the webhook with its new secret, shown once. */
export type RotatedWebhookSecret = Schemas["Webhook"] & { secret: string };

/** POST /webhooks/:id/replay → 202. */
export interface ReplayQueued {
  queued: number;
}

/** A delivery record keeps the first 1 KiB of the receiver's answer. */
export type Delivery = Schemas["Delivery"] & { response_excerpt: string | null };
