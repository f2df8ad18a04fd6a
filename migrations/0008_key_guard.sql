ALTER TABLE `api_keys` ADD `revoked_reason` text;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `leaked_at` text;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `leak_url` text;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `allowed_ips` text;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `scopes` text;--> statement-breakpoint
ALTER TABLE `events` ADD `account_id` text;--> statement-breakpoint
CREATE INDEX `events_account` ON `events` (`account_id`,`seq`) WHERE account_id IS NOT NULL;