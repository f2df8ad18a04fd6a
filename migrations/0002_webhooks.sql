CREATE TABLE `webhook_deliveries` (
	`id` integer PRIMARY KEY NOT NULL,
	`event_id` text NOT NULL,
	`webhook_id` text NOT NULL,
	`type` text NOT NULL,
	`attempt` integer NOT NULL,
	`status_code` integer,
	`error` text,
	`duration_ms` integer NOT NULL,
	`outcome` text NOT NULL,
	`delivered_at` text NOT NULL,
	FOREIGN KEY (`webhook_id`) REFERENCES `webhooks`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `webhook_deliveries_webhook` ON `webhook_deliveries` (`webhook_id`,`id`);--> statement-breakpoint
CREATE TABLE `webhooks` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`url` text NOT NULL,
	`description` text,
	`events` text NOT NULL,
	`min_change_bp` integer DEFAULT 0 NOT NULL,
	`status` text DEFAULT 'enabled' NOT NULL,
	`secret_ciphertext` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`disabled_at` text,
	`disabled_reason` text,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `webhooks_account_created` ON `webhooks` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `webhooks_status` ON `webhooks` (`status`);