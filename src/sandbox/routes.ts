import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, openApiApp } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { operation } from "../operation/operation.ts";
import { ACCOUNT_BUDGETS, budgetLabel, budgetRefusal, NOTHING_TAKEN } from "../rate-limit/account-budgets.ts";
import { accountBudgets } from "../rate-limit/stub.ts";
import { deliveriesQueued } from "../webhooks/delivery/budgets.ts";
import { sandboxBase } from "./catalogue.ts";
import { checkSandboxObservations } from "./overlay.ts";
import { MAX_TEST_OBSERVATIONS, SandboxIngestionResult, testObservationsBody } from "./schema.ts";
import { accountSandbox } from "./stub.ts";

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
      "events; unlike a live observation, one keeps the offer terms it leaves out (url, regular_price, shipping_cost, seller, " +
      "condition, quantity with unit; null clears one; money terms only while the currency stays the offer's). The sandbox " +
      "events reach this account's test webhooks and test keys' feed, stream and /mcp, never a live key or another account. " +
      `Each observation counts in the account's ${budgetLabel("sandbox-changes")} (a rolling ${ACCOUNT_BUDGETS["sandbox-changes"].per}): ` +
      "a call it cannot take whole is 429 (Retry-After: when it fits) and writes nothing. The deliveries to test webhooks count in the " +
      `account's ${budgetLabel("test-deliveries")}; test_deliveries says how many were held back.`,
    credential: "api-key",
    scope: "sandbox:write",
    environment: "test",
    request: { query: noQuery, body: jsonBody(testObservationsBody, "The observations") },
    responses: { 200: jsonResponse("What the observations changed in your sandbox, and their test deliveries", SandboxIngestionResult) },
  }),
);

/** POST /test/observations (a test key, scope sandbox:write): an ingestion into the key's account's sandbox. */
export const testModeRoutes = openApiApp().openapi(simulateObservationsRoute, async (c) => {
  const { accountId } = c.var.apiKey;
  const { observations } = c.req.valid("json");
  checkSandboxObservations(sandboxBase(), observations);
  // Whole or not at all, counted before anything is written: a call past the budget changes nothing.
  const budgets = accountBudgets(c.env.RATE_LIMIT_BUCKETS, c.var.services.work);
  const grant = await budgets.take(accountId, "sandbox-changes", observations.length, { whole: true });
  if (grant.granted === 0) throw budgetRefusal("sandbox-changes", observations.length, grant);
  // The account's object applies them (its own SQLite, not D1) and hands back the events they emitted, which are in no
  // outbox: their first delivery is their one fan-out, and this route waits for it to say what the budget held back.
  const { result, events } = await accountSandbox(c.env.SANDBOX, c.var.services.work, accountId).ingest(observations);
  const outcome = await c.var.services.afterCommit(events, { inOutbox: false });
  const testDeliveries = outcome === undefined ? null : (outcome.get(accountId) ?? deliveriesQueued("test-deliveries", 0, NOTHING_TAKEN));
  return c.json({ ...result, test_deliveries: testDeliveries }, 200);
});
