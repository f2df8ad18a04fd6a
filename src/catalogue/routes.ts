import { openApiAppOf } from "../http/openapi.ts";
import { registerGetProduct } from "./routes/get-product.ts";
import { registerGetProductHistory } from "./routes/get-product-history.ts";
import { registerListCompetitors } from "./routes/list-competitors.ts";
import { registerListProducts } from "./routes/list-products.ts";
import { registerUpdateCompetitor } from "./routes/update-competitor.ts";

/*
 * Each operation is declared beside its handler in its own file under routes/; they are registered here in the
 * document's order.
 */

/** GET /products… (API key). No CORS headers, on purpose (contract). */
export const productRoutes = openApiAppOf(registerListProducts, registerGetProduct, registerGetProductHistory);

/** GET /competitors (API key): from the snapshot's manifest, no offer is read (a test key: its sandbox's shops). */
export const competitorRoutes = openApiAppOf(registerListCompetitors);

/** PATCH /admin/competitors/:id (admin, scope prices:write). */
export const adminCompetitorRoutes = openApiAppOf(registerUpdateCompetitor);
