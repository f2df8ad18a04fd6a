CREATE TABLE `unreached_stream_pushes` (
	`key_id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`active` integer NOT NULL,
	`expires_at` integer,
	`noted_at` integer NOT NULL
);
