CREATE TABLE `catalogue_state` (
	`id` integer PRIMARY KEY NOT NULL,
	`version` integer NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	CONSTRAINT "catalogue_state_single_row" CHECK("catalogue_state"."id" = 1)
);
--> statement-breakpoint
CREATE TABLE `competitors` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`domain` text
);
--> statement-breakpoint
CREATE TABLE `offers` (
	`product_id` text NOT NULL,
	`competitor_id` text NOT NULL,
	`url` text,
	`price_minor` integer NOT NULL,
	`regular_price_minor` integer,
	`currency` text NOT NULL,
	`shipping_minor` integer,
	`in_stock` integer NOT NULL,
	`previous_price_minor` integer,
	`price_changed_at` text,
	`checked_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	PRIMARY KEY(`product_id`, `competitor_id`),
	FOREIGN KEY (`product_id`) REFERENCES `products`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`competitor_id`) REFERENCES `competitors`(`id`) ON UPDATE no action ON DELETE no action,
	CONSTRAINT "offers_money_not_negative" CHECK("offers"."price_minor" >= 0 AND coalesce("offers"."regular_price_minor", 0) >= 0 AND coalesce("offers"."shipping_minor", 0) >= 0 AND coalesce("offers"."previous_price_minor", 0) >= 0)
);
--> statement-breakpoint
CREATE INDEX `offers_competitor` ON `offers` (`competitor_id`);--> statement-breakpoint
CREATE TABLE `price_history` (
	`id` integer PRIMARY KEY NOT NULL,
	`product_id` text NOT NULL,
	`competitor_id` text NOT NULL,
	`price_minor` integer NOT NULL,
	`currency` text NOT NULL,
	`in_stock` integer NOT NULL,
	`observed_at` text NOT NULL,
	FOREIGN KEY (`product_id`) REFERENCES `products`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`competitor_id`) REFERENCES `competitors`(`id`) ON UPDATE no action ON DELETE no action,
	CONSTRAINT "price_history_price_not_negative" CHECK("price_history"."price_minor" >= 0)
);
--> statement-breakpoint
CREATE INDEX `price_history_product_observed` ON `price_history` (`product_id`,`observed_at`);--> statement-breakpoint
CREATE TABLE `products` (
	`id` text PRIMARY KEY NOT NULL,
	`sku` text NOT NULL,
	`gtin` text,
	`mpn` text,
	`name` text NOT NULL,
	`brand` text,
	`category` text,
	`url` text,
	`image_url` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`last_changed_at` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `products_sku_unique` ON `products` (`sku`);--> statement-breakpoint
CREATE INDEX `products_updated_at` ON `products` (`updated_at`);