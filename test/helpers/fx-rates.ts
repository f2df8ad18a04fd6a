import { call, expectJson } from "./http.ts";
import { adminToken } from "./tokens.ts";

/** Today's reference rates (EUR base), so that `?currency=` of these converts instead of being refused. */
const TODAYS_RATES = { USD: "1.0832", JPY: "162.45", GBP: "0.8512", KWD: "0.3331" };

export async function storeTodaysRates(rates: Record<string, string> = TODAYS_RATES, base = "EUR") {
  const date = new Date().toISOString().slice(0, 10);
  return expectJson(await call("PUT", "/admin/fx-rates", { token: await adminToken(), body: { base, date, rates } }), 200);
}
