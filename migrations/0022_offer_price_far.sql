CREATE TABLE `offer_price_far` (
	`product_id` text NOT NULL,
	`competitor_id` text NOT NULL,
	`through` text NOT NULL,
	`extremes` text NOT NULL,
	`close_minor` integer NOT NULL,
	`close_currency` text NOT NULL,
	`closed_at` text NOT NULL,
	PRIMARY KEY(`product_id`, `competitor_id`)
);
