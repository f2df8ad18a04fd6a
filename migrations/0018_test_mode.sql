CREATE TABLE `sandbox_history` (
	`id` integer PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`product_id` text NOT NULL,
	`competitor_id` text NOT NULL,
	`price_minor` integer NOT NULL,
	`currency` text NOT NULL,
	`in_stock` integer NOT NULL,
	`observed_at` text NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `sandbox_history_product` ON `sandbox_history` (`account_id`,`product_id`,`observed_at`);--> statement-breakpoint
CREATE TABLE `sandbox_products` (
	`account_id` text NOT NULL,
	`product_id` text NOT NULL,
	`version` integer NOT NULL,
	`state` text NOT NULL,
	PRIMARY KEY(`account_id`, `product_id`),
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
-- Test mode (docs/key-format.md, src/sandbox/): keys, webhooks and events carry their environment; each account's sandbox
-- changes are stored apart (sandbox_products, sandbox_history) and laid over the generated catalogue.
DROP INDEX `events_account`;--> statement-breakpoint
ALTER TABLE `events` ADD `environment` text DEFAULT 'live' NOT NULL;--> statement-breakpoint
CREATE INDEX `events_sandbox` ON `events` (`account_id`,`seq`) WHERE environment = 'test';--> statement-breakpoint
CREATE INDEX `events_account` ON `events` (`account_id`,`seq`) WHERE account_id IS NOT NULL AND environment = 'live';--> statement-breakpoint
ALTER TABLE `api_keys` ADD `environment` text DEFAULT 'live' NOT NULL;--> statement-breakpoint
ALTER TABLE `webhooks` ADD `environment` text DEFAULT 'live' NOT NULL;--> statement-breakpoint
-- A test webhook is never filed under rule values: the live fan-out never reads it; a sandbox batch reads its account's
-- test webhooks by account (src/webhooks/delivery/store.ts). The triggers of 0015 read this view by name.
DROP VIEW `webhook_rule_rows`;
--> statement-breakpoint
CREATE VIEW `webhook_rule_rows` AS
  SELECT w.id AS webhook_id, list.key AS kind, entry.value AS value,
    (SELECT count(*) FROM json_each(w.filters) l WHERE l.key IN ('competitors', 'brands', 'categories', 'skus')) AS lists
  FROM webhooks w, json_each(w.filters) list, json_each(list.value) entry
  WHERE w.status = 'enabled' AND w.environment = 'live' AND list.key IN ('competitors', 'brands', 'categories', 'skus')
  UNION
  SELECT w.id, 'events', type.value, 0
  FROM webhooks w, json_each(w.events) type
  WHERE w.status = 'enabled' AND w.environment = 'live'
    AND NOT EXISTS (SELECT 1 FROM json_each(w.filters) l WHERE l.key IN ('competitors', 'brands', 'categories', 'skus'));
