import { emptyResponse } from "../../http/openapi.ts";

export const notModified = emptyResponse("Not modified: the catalogue is unchanged since the ETag sent", ["ETag", "Cache-Control"]);
/** What the catalogue's reads declare alike (src/catalogue/routes/). */
export const common = { tags: ["Catalogue"], credential: "api-key" as const, scope: "products:read" as const };
/** What a test key reads instead (src/sandbox/), said on each catalogue read. */
export const TEST_KEY_READS =
  "A test key (`pda_test_…`) reads its account's sandbox instead: 1,000 synthetic products (`TEST-…` SKUs) and the " +
  "account's own changes (POST /test/observations), never the catalogue; a live key never reads a sandbox.";
