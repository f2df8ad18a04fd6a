import { openApiAppOf } from "../http/openapi.ts";
import { registerGetAccount } from "./routes/get-account.ts";
import { registerGetAccountUsage } from "./routes/get-account-usage.ts";
import { registerSetAccountPlan } from "./routes/set-account-plan.ts";

/*
 * Each operation is declared beside its handler in its own file under routes/; they are registered here in the
 * document's order.
 */

/** GET /account, GET /account/usage (account login). */
export const accountRoutes = openApiAppOf(registerGetAccount, registerGetAccountUsage);

/** PUT /admin/accounts/:id/plan (admin, scope accounts:write). */
export const adminAccountRoutes = openApiAppOf(registerSetAccountPlan);
