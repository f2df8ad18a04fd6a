-- WITHOUT ROWID added by hand (drizzle-kit has no option for it): each row is stored once, in its primary key's B-tree
-- (src/alerts/tables.ts).
CREATE TABLE `offer_fold_cursor` (
	`id` integer PRIMARY KEY NOT NULL,
	`product_id` text NOT NULL,
	`competitor_id` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `offer_price_days` (
	`product_id` text NOT NULL,
	`competitor_id` text NOT NULL,
	`day` integer NOT NULL,
	`currency` text NOT NULL,
	`low_minor` integer NOT NULL,
	`high_minor` integer NOT NULL,
	`close_minor` integer NOT NULL,
	`closed_at` integer NOT NULL,
	PRIMARY KEY(`product_id`, `competitor_id`, `day`, `currency`)
) WITHOUT ROWID;
--> statement-breakpoint
CREATE TABLE `offer_price_far` (
	`product_id` text NOT NULL,
	`competitor_id` text NOT NULL,
	`through` integer NOT NULL,
	`extremes` text NOT NULL,
	`close_minor` integer NOT NULL,
	`close_currency` text NOT NULL,
	`closed_at` integer NOT NULL,
	PRIMARY KEY(`product_id`, `competitor_id`)
) WITHOUT ROWID;
