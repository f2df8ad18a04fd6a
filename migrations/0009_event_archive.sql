CREATE TABLE `event_archive` (
	`first_seq` integer PRIMARY KEY NOT NULL,
	`last_seq` integer NOT NULL,
	`min_timestamp` text NOT NULL,
	`max_timestamp` text NOT NULL,
	`count` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `event_archive_max_timestamp` ON `event_archive` (`max_timestamp`);--> statement-breakpoint
CREATE INDEX `events_type_seq` ON `events` (`type`,`seq`);