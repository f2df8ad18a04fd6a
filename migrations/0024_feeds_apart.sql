DROP INDEX `events_account`;--> statement-breakpoint
CREATE INDEX `events_catalogue_timestamp` ON `events` (`timestamp`) WHERE account_id IS NULL;--> statement-breakpoint
CREATE INDEX `events_account` ON `events` (`account_id`,`seq`);