-- One row per cron task that must not overlap with itself (src/platform/cron-lease.ts): the run holding it, and
-- until when (epoch ms). A run inserts or takes over an expired row, and deletes its own when it ends.
CREATE TABLE `cron_leases` (
	`task` text PRIMARY KEY NOT NULL,
	`holder` text NOT NULL,
	`expires_at` integer NOT NULL
);
