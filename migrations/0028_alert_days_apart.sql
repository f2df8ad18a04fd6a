-- The alert windows' day rows moved to a database of their own (ALERTS_DB, migrations-alerts/). No rows are carried
-- over: they are derived data the history archiver writes from the history it moves (src/catalogue/history-archive.ts),
-- and their stored form changed (integer days, Unix ms). What is lost is what they held of history moved before the
-- deploy: for its first 32 days, a window over 2 days that opens before the deploy sees the prices moved since, D1's
-- last days and the event's own, not those older ones (the price history and its archive keep every row).
DROP TABLE `offer_price_days`;--> statement-breakpoint
DROP TABLE `offer_price_far`;