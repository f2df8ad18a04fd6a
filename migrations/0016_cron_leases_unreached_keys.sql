-- One row per cron task that must not overlap with itself (src/platform/cron-lease.ts): the run holding it, and
-- until when (epoch ms). A run inserts or takes over an expired row, and deletes its own when it ends.
CREATE TABLE `cron_leases` (
	`task` text PRIMARY KEY NOT NULL,
	`holder` text NOT NULL,
	`expires_at` integer NOT NULL
);--> statement-breakpoint
-- Keys a plan change could not push its limits to (src/accounts/plan-pushes.ts): the every-minute cron asks each
-- one's object to read its key again, and deletes the row once it has. `noted_at` is epoch ms.
CREATE TABLE `unreached_plan_pushes` (
	`key_hash` text PRIMARY KEY NOT NULL,
	`noted_at` integer NOT NULL
);
