/** The floor: the product's GET /products handler with no authentication and no rate limiting. */
import { type PeerEnv, peerApp } from "../shared.ts";

export { CatalogueBuilder } from "../shared.ts";

const app = peerApp<PeerEnv<object>>(async (c, next) => {
  // The data routes ask for an API key credential; the floor hands them one without checking anything.
  c.set("credential", {
    kind: "api-key",
    keyHash: "",
    environment: "live",
    key: { id: "bare", accountId: "bare", environment: "live", keyHash: "", request: { ip: "", scope: undefined } },
  });
  await next();
});

export default { fetch: app.fetch } satisfies ExportedHandler<Env>;
