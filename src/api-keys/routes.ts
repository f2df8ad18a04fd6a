import { openApiAppOf } from "../http/openapi.ts";
import { registerCreateApiKey } from "./routes/create-api-key.ts";
import { registerGetApiKeyUsage } from "./routes/get-api-key-usage.ts";
import { registerListApiKeys } from "./routes/list-api-keys.ts";
import { registerRevokeApiKey } from "./routes/revoke-api-key.ts";
import { registerRotateApiKey } from "./routes/rotate-api-key.ts";
import { registerUpdateApiKey } from "./routes/update-api-key.ts";

/**
 * /api-keys (account login). Another account's key ids are 404, as if they did not exist. Each operation is declared
 * beside its handler in its own file under routes/; they are registered here in the document's order.
 */
export const apiKeyRoutes = openApiAppOf(
  registerCreateApiKey,
  registerListApiKeys,
  registerRotateApiKey,
  registerGetApiKeyUsage,
  registerUpdateApiKey,
  registerRevokeApiKey,
);
