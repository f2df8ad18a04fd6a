import { describe, expect, it } from "vitest";
import { stale } from "../../scripts/generate-client.ts";

/**
 * In Node (openapi-typescript and esbuild are Node tools): the committed client/openapi.json and
 * client/schema.d.ts are exactly what `npm run client:generate` makes from the routes now. With
 * test/openapi/client.test.ts (the worker serves that same document), the client's types cannot
 * drift from the API.
 */
describe("the typed client's generated files", () => {
  it("match the routes (else: npm run client:generate, and commit)", async () => {
    expect(await stale()).toEqual([]);
  }, 60_000);
});
