ALTER TABLE `api_keys` ADD `expires_at` text;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `rotated_from` text;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `rotated_to` text;