/**
 * The wire shapes the page uses, by the names it uses them under: every one is the generated
 * client's type (client/schema.d.ts, from the routes' own zod schemas via `npm run client:generate`),
 * so the page cannot drift from the API.
 */
import type { components, operations } from "../../../client/schema.d.ts";

type Schemas = components["schemas"];

export type ApiKey = Schemas["ApiKey"];
/** POST /api-keys and POST /api-keys/:id/rotate: the record plus the full key, shown once. */
export type CreatedApiKey = Schemas["CreatedApiKey"];
export type UsageBucket = Schemas["UsageBucket"];
/** GET /api-keys/:id/usage (with key_id) or GET /account/usage. */
export type Usage = Schemas["KeyUsage"] | Schemas["AccountUsage"];
export type Granularity = Usage["granularity"];
export type WebhookPatch = operations["updateWebhook"]["requestBody"]["content"]["application/json"];
/** POST /webhooks/:id/rotate-secret: the webhook with its new secret, shown once. */
export type RotatedWebhookSecret = Schemas["CreatedWebhook"];
export type ReplayQueued = Schemas["ReplayQueued"];
export type Delivery = Schemas["Delivery"];
export type Export = Schemas["Export"];
/** GET /exports/:id: the export with its files' signed download links (valid an hour). */
export type ExportDetail = Schemas["ExportDetail"];
export type ExportRequest = operations["createExport"]["requestBody"]["content"]["application/json"];
