import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, openApiApp } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { operation } from "../operation/operation.ts";
import { FxRates, fxRatesBody, LatestFxRates } from "./schema.ts";
import { latestRatesView, putFxRates } from "./service.ts";

const putFxRatesRoute = createRoute(
  operation({
    method: "put",
    path: "/",
    operationId: "putFxRates",
    tags: ["Admin"],
    summary: "Store a day's reference exchange rates",
    description:
      "Replaces the rates of `date`. `GET /products?currency=` and `GET /products/{id}?currency=` convert with the latest day on " +
      "or before today, through `base` (cross rates), rounding half-even to the target currency's minor unit.",
    credential: "admin",
    scope: "prices:write",
    request: { query: noQuery, body: jsonBody(fxRatesBody, "The day's rates") },
    responses: { 200: jsonResponse("The rates as stored", FxRates) },
  }),
);

/** PUT /admin/fx-rates (admin, scope prices:write). */
export const fxRateRoutes = openApiApp().openapi(putFxRatesRoute, async (c) => {
  const { db, catalogue, afterAnswer } = c.var.services;
  const rates = await putFxRates(db, catalogue.bucket, c.req.valid("json"));
  // New rates make new converted pieces: the builder converts those of the currencies it keeps warm.
  afterAnswer(catalogue.poke());
  return c.json(rates, 200);
});

const getFxRatesRoute = createRoute(
  operation({
    method: "get",
    path: "/",
    operationId: "getFxRates",
    tags: ["Catalogue"],
    summary: "Today's exchange rates, and the currencies ?currency= converts into",
    description:
      "The rates `?currency=` (GET /products, GET /products/{id}, the MCP product tools) converts with: the latest day on or " +
      "before today (UTC), as PUT /admin/fx-rates stored it. `currencies` lists every code a conversion accepts today; any " +
      "other is refused with a 400 naming it. Test keys get the same rates: the sandbox converts with them too.",
    credential: "api-key",
    scope: "products:read",
    request: { query: noQuery },
    responses: { 200: jsonResponse("Today's rates", LatestFxRates) },
  }),
);

/** GET /fx-rates (API key, scope products:read): from the published rates the isolate keeps, no D1 statement when warm. */
export const latestFxRateRoutes = openApiApp().openapi(getFxRatesRoute, async (c) =>
  c.json(latestRatesView(await c.var.keyData.fxRates()), 200),
);
