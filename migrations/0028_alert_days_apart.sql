-- The alert windows' day rows moved to a database of their own (ALERTS_DB, migrations-alerts/). No rows are carried
-- over: they are derived data the history archiver writes again from the history it moves (src/catalogue/history-archive.ts).
DROP TABLE `offer_price_days`;--> statement-breakpoint
DROP TABLE `offer_price_far`;