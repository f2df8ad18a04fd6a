ALTER TABLE `api_keys` ADD `expiry_notice_days` integer;--> statement-breakpoint
CREATE INDEX `api_keys_expiring` ON `api_keys` (`expires_at`) WHERE expires_at IS NOT NULL AND status = 'active';