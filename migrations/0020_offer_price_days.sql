CREATE TABLE `offer_price_days` (
	`product_id` text NOT NULL,
	`competitor_id` text NOT NULL,
	`day` text NOT NULL,
	`currency` text NOT NULL,
	`low_minor` integer NOT NULL,
	`high_minor` integer NOT NULL,
	`close_minor` integer NOT NULL,
	`closed_at` text NOT NULL,
	PRIMARY KEY(`product_id`, `competitor_id`, `day`, `currency`)
);
--> statement-breakpoint
CREATE INDEX `offer_price_days_day` ON `offer_price_days` (`day`);