ALTER TABLE `webhooks` ADD `source` text DEFAULT 'webhook' NOT NULL;--> statement-breakpoint
ALTER TABLE `webhooks` ADD `expires_at` text;--> statement-breakpoint
ALTER TABLE `webhooks` ADD `api_key_id` text;--> statement-breakpoint
CREATE INDEX `webhooks_expires` ON `webhooks` (`expires_at`);