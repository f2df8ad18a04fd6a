ALTER TABLE `catalogue_state` ADD `reset_version` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `products` ADD `changed_version` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX `products_changed_version` ON `products` (`changed_version`,`id`);