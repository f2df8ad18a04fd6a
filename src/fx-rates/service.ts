import { desc, lte } from "drizzle-orm";
import type { Database } from "../platform/db.ts";
import { fxRates } from "../platform/tables.ts";
import type { RateDay } from "./rates.ts";
import { type FxRatesBody, type FxRatesView, givenRates } from "./schema.ts";

/** Reference rates: one row a day, replaced by a PUT for that day. */

export async function putFxRates(db: Database, body: FxRatesBody): Promise<FxRatesView> {
  const row = { date: body.date, base: body.base, rates: givenRates(body), updatedAt: new Date().toISOString() };
  await db
    .insert(fxRates)
    .values(row)
    .onConflictDoUpdate({ target: fxRates.date, set: { base: row.base, rates: row.rates, updatedAt: row.updatedAt } });
  return { base: row.base, date: row.date, rates: row.rates, updated_at: row.updatedAt };
}

/** The latest day's rates on or before `today` (YYYY-MM-DD, UTC): one statement, one row read; null before any. */
export async function latestRates(db: Database, today = new Date().toISOString().slice(0, 10)): Promise<RateDay | null> {
  const row = await db.select().from(fxRates).where(lte(fxRates.date, today)).orderBy(desc(fxRates.date)).limit(1).get();
  return row ? { base: row.base, date: row.date, rates: row.rates } : null;
}
