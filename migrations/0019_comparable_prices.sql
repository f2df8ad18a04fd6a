CREATE TABLE `fx_rates` (
	`date` text PRIMARY KEY NOT NULL,
	`base` text NOT NULL,
	`rates` text NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
ALTER TABLE `offers` ADD `seller` text;--> statement-breakpoint
ALTER TABLE `offers` ADD `condition` text DEFAULT 'new' NOT NULL;--> statement-breakpoint
ALTER TABLE `offers` ADD `quantity` text;--> statement-breakpoint
ALTER TABLE `offers` ADD `unit` text;--> statement-breakpoint
ALTER TABLE `offers` ADD `check_status` text DEFAULT 'ok' NOT NULL;--> statement-breakpoint
ALTER TABLE `offers` ADD `lowest_price_30d_minor` integer;--> statement-breakpoint
ALTER TABLE `offers` ADD `prior_prices` text DEFAULT '[]' NOT NULL;