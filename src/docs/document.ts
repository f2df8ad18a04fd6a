import type { OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import { ACCOUNT_EVENTS } from "../account-events/schema.ts";
import { PriceChangedEvent, StockChangedEvent, TestEvent, WEBHOOK_TEST_EVENT } from "../events/schema.ts";
import type { AppEnv } from "../http/app-env.ts";
import { RULE_MEANINGS } from "../http/document-rules.ts";
import { ErrorBody, HEADER_COMPONENTS, RESPONSE_COMPONENTS, SECURITY_SCHEMES } from "../http/openapi-components.ts";

/** GET /openapi.json: the routes' own declarations, the shared components, and what webhooks receive. */

/** The document's description, a paragraph a line (Markdown). */
const DESCRIPTION = [
  "Competitor prices for your products, read with API keys; keys, webhooks and the account are managed with the " + "account login.",
  "",
  "**Rate limits.** Every response carries X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, RateLimit and " +
    "RateLimit-Policy, from the bucket the request was counted in: the API key (its plan: 10, 60 or 300 a minute), the " +
    "account (60 a minute) for an account login, the admin subject (600 a minute) on /admin, otherwise the client IP " +
    "(30 a minute). On 429, wait Retry-After seconds (60 when absent) and back off exponentially on repeated 429s.",
  "",
  '**Errors** are always `{"detail": "…"}`. Any path answers 405 (with Allow) to a method it does not have, and an ' +
    "unknown path 404. Bodies are read as JSON whatever their Content-Type; unknown fields and unknown query " +
    "parameters are refused (400).",
  "",
  "**Rules across fields.** Every rule JSON Schema can state is in the schemas (dependentRequired, a currency's decimals " +
    "as if/then, not). The rest is in the extension `x-rules`: a list on an object schema, naming its properties, or on an " +
    'operation, naming its query parameters. Each entry is `{"rule", "field", …}`, and a request breaking it is a 400 ' +
    `whose detail names \`field\`. The rules: ${Object.values(RULE_MEANINGS).join("; ")}.`,
].join("\n");

const deliveryHeaders = z.object({
  "webhook-id": z.string().meta({ description: "The event id, the same on every retry" }),
  "webhook-timestamp": z.string().meta({ description: "Unix seconds of this attempt" }),
  "webhook-signature": z
    .string()
    .meta({ description: 'v1,<base64 HMAC-SHA256 of "id.timestamp.body"> keyed with the secret; verify with a Standard Webhooks library' }),
});

const EVENTS = [
  [PriceChangedEvent, "price.changed", "An offer's price changed (at least the webhook's min_change_pct)"],
  [StockChangedEvent, "stock.changed", "An offer went in or out of stock"],
  [TestEvent, WEBHOOK_TEST_EVENT, "Sent by POST /webhooks/{id}/test"],
  ...ACCOUNT_EVENTS,
] as const;

function registerWebhookEvents(registry: OpenAPIHono["openAPIRegistry"]): void {
  for (const [schema, name, summary] of EVENTS) {
    registry.registerWebhook({
      method: "post",
      path: name,
      operationId: `${name.replace(".", "_")}_event`,
      summary,
      description:
        "A signed POST to the webhook's URL (Standard Webhooks). Answer 2xx within 15 s; anything else is retried " +
        "with exponential backoff for about a day; 410 disables the webhook.",
      request: { headers: deliveryHeaders, body: { required: true, content: { "application/json": { schema } } } },
      responses: { 200: { description: "Any 2xx: delivered" }, 410: { description: "Gone: the webhook is disabled" } },
    });
  }
}

/** Builds the OpenAPI 3.1 document from the routes registered on `app` (and those mounted into it). */
export function openApiDocument(app: OpenAPIHono<AppEnv>) {
  const registry = app.openAPIRegistry;
  registry.register("Error", ErrorBody);
  for (const [name, scheme] of Object.entries(SECURITY_SCHEMES)) registry.registerComponent("securitySchemes", name, scheme);
  for (const [name, header] of Object.entries(HEADER_COMPONENTS)) registry.registerComponent("headers", name, header);
  for (const [name, response] of Object.entries(RESPONSE_COMPONENTS)) registry.registerComponent("responses", name, response);
  registerWebhookEvents(registry);
  return app.getOpenAPI31Document({
    openapi: "3.1.0",
    info: { title: "Price Data API", version: "0.1.0", description: DESCRIPTION },
    tags: [
      { name: "Catalogue", description: "Products, their offers and history, and competitors (API key)" },
      {
        name: "Events",
        description: "The catalogue's price and stock events of the last 30 days, to catch up after a webhook was down (API key)",
      },
      { name: "Account", description: "The account and its plan (account login)" },
      { name: "API keys", description: "Create, list, rename and revoke keys (account login)" },
      { name: "Webhooks", description: "Price and stock change notifications, signed per Standard Webhooks (account login)" },
      { name: "Admin", description: "Plans and price ingestion (admin JWT with a scope)" },
    ],
  });
}
