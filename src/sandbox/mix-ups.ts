import { ApiError } from "../http/errors.ts";
import { SANDBOX_SKU_PREFIX, sandboxBase } from "./catalogue.ts";

/**
 * A product asked for with a key of the other environment: the 404 says which environment the key reads and which key
 * the product needs, as far as it can tell. Sandbox products are recognisable (the generated base's ids and SKUs), so a
 * live key's miss on one is named; a test key's miss is never looked up in the live catalogue (a test key never sees live
 * data), so its 404 says what it reads and what a live product needs.
 */

/** A test key's 404: `what` is the id, or `sku …`. */
export const notInSandbox = (what: string) =>
  new ApiError(
    404,
    `There is no product ${JSON.stringify(what)} in test mode's sandbox: this is a test key (pda_test_…), which reads only the ` +
      `sandbox's ${SANDBOX_SKU_PREFIX} products (GET /products lists their ids). A live product needs a live key (pda_live_…).`,
  );

/** Whether a product id (or, without one, a SKU) is the sandbox's. */
export const isSandboxProduct = ({ id, sku }: { id?: string | undefined; sku?: string | undefined }) =>
  id !== undefined ? sandboxBase().byId.has(id) : sku !== undefined && sandboxBase().bySku.has(sku);

/** A live key's 404 for a sandbox product. */
export const sandboxProductOnLiveKey = (what: string) =>
  new ApiError(
    404,
    `Product ${JSON.stringify(what)} is a test-mode sandbox product, and this is a live key (pda_live_…), which reads the live ` +
      'catalogue only: read it with a test key (pda_test_…; POST /api-keys with "environment": "test" makes one).',
  );
