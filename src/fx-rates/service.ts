import { asc, desc, gte, lte, max, sql } from "drizzle-orm";
import type { Database } from "../platform/db.ts";
import { isolateRefreshed } from "../platform/isolate-memory.ts";
import { fxRates } from "../platform/tables.ts";
import { PUBLISHED_RATES_KEY, PublishedRates } from "./published.ts";
import type { RateDay } from "./rates.ts";
import { type FxRatesBody, type FxRatesView, givenRates, type LatestFxRatesView } from "./schema.ts";

/**
 * Reference rates: one row a day in D1, the record, replaced by a PUT for that day. What a conversion can use is
 * also published to R2 (the catalogue's bucket), so a `?currency=` read needs no D1 statement, as the rest of a
 * catalogue read needs none: each isolate keeps the published rates and reads them again at most once a second.
 */

const PUBLISHED_TTL_MS = 1000;
/** Publishers racing for the object each try again after losing; this many losses in a row is an error. */
const PUBLISH_ATTEMPTS = 5;

const published = isolateRefreshed<PublishedRates>(PUBLISHED_TTL_MS);

const utcToday = () => new Date().toISOString().slice(0, 10);

/** A row as a conversion takes it; its key order is the order the list's ETag hashes. */
const rateDay = (row: typeof fxRates.$inferSelect): RateDay => ({ base: row.base, date: row.date, rates: row.rates });

export async function putFxRates(db: Database, bucket: R2Bucket, body: FxRatesBody): Promise<FxRatesView> {
  const row = { date: body.date, base: body.base, rates: givenRates(body), updatedAt: new Date().toISOString() };
  await db
    .insert(fxRates)
    .values(row)
    .onConflictDoUpdate({ target: fxRates.date, set: { base: row.base, rates: row.rates, updatedAt: row.updatedAt } });
  await publishRates(db, bucket);
  return { base: row.base, date: row.date, rates: row.rates, updated_at: row.updatedAt };
}

/**
 * The latest day's rates on or before today (UTC), as a conversion uses them: from what this isolate keeps of the
 * published rates, with no D1 statement. D1 is read only to publish them when R2 has none yet (a new deployment, or
 * after the seed), and when this isolate's clock is a day behind the publisher's.
 */
export async function todaysRates(db: Database, bucket: R2Bucket): Promise<RateDay | null> {
  const today = utcToday();
  const rates = await published.get(async () => {
    const object = await bucket.get(PUBLISHED_RATES_KEY);
    return object ? PublishedRates.parse(await object.json()) : publishRates(db, bucket);
  });
  if (today < rates.as_of) return latestRates(db, today);
  return rates.days.findLast((day) => day.date <= today) ?? null;
}

/** The latest day's rates on or before `today` (YYYY-MM-DD, UTC): one statement, one row read; null before any. */
async function latestRates(db: Database, today: string): Promise<RateDay | null> {
  const row = await db.select().from(fxRates).where(lte(fxRates.date, today)).orderBy(desc(fxRates.date)).limit(1).get();
  return row ? rateDay(row) : null;
}

/**
 * D1's rates as of today, written to R2 and kept by this isolate. Only over the object as it was before the D1 read
 * (its etag): a publisher that lost the race may have read D1 before another's PUT, so it reads again, and the object
 * ends up with every PUT in it.
 */
async function publishRates(db: Database, bucket: R2Bucket): Promise<PublishedRates> {
  for (let attempt = 1; ; attempt++) {
    const before = await bucket.head(PUBLISHED_RATES_KEY);
    const rates = await ratesAsOf(db, utcToday());
    const onlyIf = before ? { etagMatches: before.etag } : { etagDoesNotMatch: "*" };
    if (await bucket.put(PUBLISHED_RATES_KEY, JSON.stringify(rates), { onlyIf })) {
      published.keep(rates);
      return rates;
    }
    if (attempt === PUBLISH_ATTEMPTS) throw new Error(`Publishing the fx rates lost ${PUBLISH_ATTEMPTS} races in a row`);
  }
}

/** One statement: the rows from the latest day on or before `asOf` (every row when there is none). */
async function ratesAsOf(db: Database, asOf: string): Promise<PublishedRates> {
  const latestOnOrBefore = db
    .select({ date: max(fxRates.date) })
    .from(fxRates)
    .where(lte(fxRates.date, asOf));
  const rows = await db
    .select()
    .from(fxRates)
    .where(gte(fxRates.date, sql`coalesce(${latestOnOrBefore}, '')`))
    .orderBy(asc(fxRates.date));
  return { as_of: asOf, days: rows.map(rateDay) };
}

/** GET /fx-rates: today's rates as a conversion uses them, and the currencies they convert into. */
export const latestRatesView = (day: RateDay | null): LatestFxRatesView =>
  day === null
    ? { base: null, date: null, rates: {}, currencies: [] }
    : { base: day.base, date: day.date, rates: { ...day.rates }, currencies: [day.base, ...Object.keys(day.rates)].sort() };
