DROP INDEX `offers_competitor`;--> statement-breakpoint
CREATE INDEX `offers_competitor` ON `offers` (`competitor_id`,`product_id`);--> statement-breakpoint
CREATE INDEX `products_brand` ON `products` (lower("brand"),`id`);--> statement-breakpoint
CREATE INDEX `products_category` ON `products` (lower("category"),`id`);