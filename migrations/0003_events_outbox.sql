CREATE TABLE `events` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`id` text NOT NULL,
	`type` text NOT NULL,
	`timestamp` text NOT NULL,
	`payload` text NOT NULL,
	`old_minor` integer,
	`new_minor` integer,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`relayed_at` text,
	`claimed_at` text,
	`fanned_out_at` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `events_id_unique` ON `events` (`id`);--> statement-breakpoint
CREATE INDEX `events_timestamp` ON `events` (`timestamp`);--> statement-breakpoint
CREATE INDEX `events_unrelayed` ON `events` (`created_at`) WHERE relayed_at IS NULL;--> statement-breakpoint
CREATE INDEX `events_not_fanned_out` ON `events` (`relayed_at`) WHERE fanned_out_at IS NULL;--> statement-breakpoint
ALTER TABLE `webhook_deliveries` ADD `response_excerpt` text;--> statement-breakpoint
CREATE INDEX `webhook_deliveries_event` ON `webhook_deliveries` (`webhook_id`,`event_id`);--> statement-breakpoint
ALTER TABLE `webhooks` ADD `failing_since` text;--> statement-breakpoint
ALTER TABLE `webhooks` ADD `previous_secret_ciphertext` text;--> statement-breakpoint
ALTER TABLE `webhooks` ADD `previous_secret_expires_at` text;