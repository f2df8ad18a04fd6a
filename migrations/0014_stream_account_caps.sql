-- Stream slots gain their account, for the cap of 25 open streams per account. A slot is a lease of at most a
-- stream's lifetime plus a minute, so the table is recreated rather than copied: open leases freed early cost nothing.
DROP TABLE `event_streams`;
--> statement-breakpoint
CREATE TABLE `event_streams` (
	`id` text PRIMARY KEY NOT NULL,
	`key_id` text NOT NULL,
	`account_id` text NOT NULL,
	`expires_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `event_streams_key` ON `event_streams` (`key_id`,`expires_at`);
--> statement-breakpoint
CREATE INDEX `event_streams_account` ON `event_streams` (`account_id`,`expires_at`);
