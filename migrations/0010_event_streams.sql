CREATE TABLE `event_streams` (
	`id` text PRIMARY KEY NOT NULL,
	`key_id` text NOT NULL,
	`expires_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `event_streams_key` ON `event_streams` (`key_id`,`expires_at`);