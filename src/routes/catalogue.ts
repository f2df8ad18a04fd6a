import { Hono } from "hono";
import type { AppEnv } from "../app-env.ts";
import { requireApiKey } from "../auth/credentials.ts";
import { database } from "../db/client.ts";
import { competitorsJson, loadCatalogue, productHistory, productJson, productsBody, productsEtag } from "../services/catalogue.ts";
import { parseQuery } from "../validation.ts";
import { historyQuery, noQuery, productsQuery } from "./catalogue-queries.ts";
import { conditionalJson } from "./conditional.ts";

export type { CompetitorView, HistoryView, OfferView, ProductView, SummaryView } from "../services/catalogue.ts";

/**
 * The data routes (API key). Middleware is attached per route, not with `use`: this app is mounted
 * at "/", where a `use` would reach every other route too. No CORS headers, on purpose (contract).
 */
export const catalogueRoutes = new Hono<AppEnv>()
  .get("/products", requireApiKey, async (c) => {
    const filters = parseQuery(c, productsQuery);
    const catalogue = await loadCatalogue(database(c.env.DB, c.var.work));
    return conditionalJson(c, await productsEtag(catalogue, filters), () => productsBody(catalogue, filters));
  })
  .get("/products/:id", requireApiKey, async (c) => {
    parseQuery(c, noQuery);
    const catalogue = await loadCatalogue(database(c.env.DB, c.var.work));
    const json = productJson(catalogue, c.req.param("id"));
    return conditionalJson(c, catalogue.etag, () => json);
  })
  .get("/products/:id/history", requireApiKey, async (c) => {
    const query = parseQuery(c, historyQuery);
    const { truncated, ...page } = await productHistory(database(c.env.DB, c.var.work), c.req.param("id"), query);
    if (truncated) c.header("X-Result-Truncated", "true");
    return c.json(page);
  })
  .get("/competitors", requireApiKey, async (c) => {
    parseQuery(c, noQuery);
    const catalogue = await loadCatalogue(database(c.env.DB, c.var.work));
    return conditionalJson(c, catalogue.etag, () => competitorsJson(catalogue));
  });
