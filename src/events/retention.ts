/**
 * How long events and price history stay in D1 and how the cron moves them to R2 (src/events/archive.ts,
 * src/catalogue/history-archive.ts). A leaf module: `npm run simulate` reads these same numbers.
 */
import { DAY_MS, MINUTE_MS } from "../platform/time.ts";

/** Events (the feed, replay) are kept this long. */
export const RETENTION_MS = 30 * DAY_MS;
/** Events stay in D1 this long after their commit, then move to R2: a client catching up within a day reads D1 only. */
export const EVENTS_IN_D1_MS = DAY_MS;
/** Events in one archive object: a page of the feed (≤ 1,000) reads one or two. */
export const EVENTS_PER_ARCHIVE_OBJECT = 1000;
/** Archive objects the cron writes per run (each: one D1 read, one R2 write, one D1 batch). */
export const EVENT_ARCHIVE_OBJECTS_PER_RUN = 10;
/** Expired archive objects the cron deletes per run. */
export const EVENT_ARCHIVE_DELETES_PER_RUN = 50;
/** Archive objects one feed page or cursor lookup reads at most; a page that needs more ends early with a cursor. */
export const EVENT_ARCHIVE_READS_PER_PAGE = 3;
/**
 * How far an event's timestamp (taken when its ingestion started) may trail an event committed after it:
 * the time an ingestion takes to commit. `since` becomes a seq bound by reading this much of the timestamp index.
 */
export const COMMIT_SKEW_MS = MINUTE_MS;

/**
 * A product's oldest history row in D1 this old sends its history to R2 ... No read needs a row in D1 past
 * HISTORY_IN_D1_MS (a history read merges D1 with the product's archive objects; the alert windows read D1's rows
 * within it and the offers' days beyond), so the rest is only how long a product's rows wait to be moved together:
 * D1 holds up to this long of history (at the model's load ≈ 1 million rows a day, 174 B each).
 */
export const HISTORY_ARCHIVE_AFTER_MS = 3 * DAY_MS;
/** ... every row of it older than this, so each product is archived about once per (after − keep). */
export const HISTORY_IN_D1_MS = 2 * DAY_MS;
/**
 * An offer's days (offer_price_days, what the alert windows read of history that left D1) are kept one by one this
 * long: while a change the feed still holds can end a window among them (its retention, and two days for the
 * day-aligned start and the clock). Older ones are folded into the offer's one far row (src/catalogue/history-archive.ts).
 */
export const OFFER_DAYS_KEPT_MS = RETENTION_MS + 2 * DAY_MS;
/**
 * Products whose history the cron archives per run: each one R2 read and one write per year it spans. A product with
 * a change a day is due about once per (after − keep): at the model's load ≈ 630,000 a day, 440 a run, under half of this.
 */
export const HISTORY_ARCHIVE_PRODUCTS_PER_RUN = 1000;
/** Archive objects one replay reads at most (about this many thousand events); a longer span is 400: replay it in parts. */
export const REPLAY_ARCHIVE_READS = 20;

/**
 * D1 round trips of one GET /events page (the cursor's lookup, then the page's one batch) and of one history read (one
 * batch); tests hold the code to them.
 */
export const D1_ROUND_TRIPS_PER_FEED_PAGE = 2;
export const D1_ROUND_TRIPS_PER_HISTORY_READ = 1;

/**
 * Webhook delivery attempts (src/webhooks/delivery/delivery-archive.ts) stay in D1 this long: the dead-letter
 * queue's check of an attempt's last record and most listings read D1 only ...
 */
export const DELIVERIES_IN_D1_MS = 10 * MINUTE_MS;
/**
 * ... and a webhook whose oldest attempt in D1 is this old has every attempt older than DELIVERIES_IN_D1_MS
 * moved to R2, so each webhook's attempts are written about once per (after − keep), and D1 holds at most
 * this long of attempts (at the target load, 1,157 a second: ≈ 2.1 million rows). The log is kept 31 days
 * either way (in R2 past this); every reader merges both sides.
 */
export const DELIVERY_ARCHIVE_AFTER_MS = 30 * MINUTE_MS;
/**
 * Webhooks whose attempts one run of the delivery archive moves (each at least one R2 write): each busy webhook is due
 * once per (after − keep), at the model's load 10,000 webhooks ÷ 20 runs = 500 a run.
 */
export const DELIVERY_ARCHIVE_WEBHOOKS_PER_RUN = 1200;
/**
 * The oldest attempts one run reads to find the due webhooks. Each due webhook has several among them (its attempts
 * since it was last moved), so a run finds as many webhooks as the square root of 2 × this × the webhooks due a
 * minute ÷ one webhook's attempts a minute: ≈ 1,200 at the model's load (500 due a minute, ≈ 7 attempts a minute each).
 */
export const DELIVERY_ARCHIVE_SCAN_ROWS = 10_000;
/** Attempts one run moves at most, read and deleted this many a D1 page. */
export const DELIVERY_ARCHIVE_ROWS_PER_RUN = 150_000;
export const DELIVERY_ARCHIVE_PAGE = 5_000;
/**
 * Archive objects GET /webhooks/:id/deliveries reads at most to fill its latest 100 when D1 has fewer. An object holds
 * about (after − keep) of a webhook's attempts (at least one): 35 objects of 20 minutes reach as far back as 10 of 70
 * did before D1's window was shortened, so a quiet webhook lists as many.
 */
export const DELIVERY_LISTING_ARCHIVE_READS = 35;
/**
 * Archive objects of one webhook's attempts a replay with only_failed reads at most (then 400: a shorter span), one at a
 * time: 350 objects of 20 minutes reach as far as 100 of 70 did (≈ 4.9 days of a webhook's attempts, the retry span included).
 */
export const DELIVERY_REPLAY_ARCHIVE_READS = 350;
/**
 * D1 round trips of one queue batch's deliveries (and of one fan-out's first deliveries after a commit):
 * their webhooks read in one query, their attempts recorded in one batch (src/webhooks/delivery/rows.ts).
 */
export const D1_ROUND_TRIPS_PER_DELIVERY_BATCH = 2;
