import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, openApiApp } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { afterCommitOf } from "../observations/after-commit.ts";
import { IngestionResult } from "../observations/schema.ts";
import { ingestObservations } from "../observations/service.ts";
import { operation } from "../operation/operation.ts";
import { sandboxBase } from "./catalogue.ts";
import { checkSandboxObservations, sandboxStore } from "./overlay.ts";
import { MAX_TEST_OBSERVATIONS, testObservationsBody } from "./schema.ts";

const simulateObservationsRoute = createRoute(
  operation({
    method: "post",
    path: "/observations",
    operationId: "simulateObservations",
    tags: ["Test mode"],
    summary: "Change your sandbox: simulated price observations",
    description:
      `The body of POST /admin/observations, at most ${MAX_TEST_OBSERVATIONS} observations, on ` +
      "sandbox SKUs (`TEST-…`, as GET /products lists them with a test key) and sandbox competitors only (others are 400, named). " +
      "It changes this account's sandbox alone, as an ingestion changes the catalogue (same rules, same answer), and emits sandbox " +
      "events: they reach this account's test webhooks and test keys' feed, stream and /mcp, never a live key or another account.",
    credential: "api-key",
    scope: "sandbox:write",
    environment: "test",
    request: { query: noQuery, body: jsonBody(testObservationsBody, "The observations") },
    responses: { 200: jsonResponse("What the observations changed in your sandbox", IngestionResult) },
  }),
);

/** POST /test/observations (a test key, scope sandbox:write): an ingestion into the key's account's sandbox. */
export const testModeRoutes = openApiApp().openapi(simulateObservationsRoute, async (c) => {
  const { accountId } = c.var.apiKey;
  const { observations } = c.req.valid("json");
  checkSandboxObservations(sandboxBase(), observations);
  const store = sandboxStore(c.var.services.db, accountId);
  return c.json(await ingestObservations(c.var.services, { observations, afterCommit: afterCommitOf(c), store }), 200);
});
