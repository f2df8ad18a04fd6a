-- Each account's sandbox lives in its own Durable Object (src/sandbox/object.ts), never in the shared D1. What the D1
-- sandbox held is dropped, not moved: it is test data (an account's simulated changes to the synthetic catalogue, and
-- the events they made), kept 7 days in the objects from now on, and every account's sandbox starts again from the
-- generated base, which is unchanged. Nothing a live key or a live webhook sees is touched.
DROP TABLE `sandbox_history`;--> statement-breakpoint
DROP TABLE `sandbox_products`;--> statement-breakpoint
DROP INDEX `events_sandbox`;--> statement-breakpoint
DROP INDEX `events_account`;--> statement-breakpoint
DELETE FROM `events` WHERE `environment` = 'test';--> statement-breakpoint
ALTER TABLE `events` DROP COLUMN `environment`;--> statement-breakpoint
CREATE INDEX `events_account` ON `events` (`account_id`,`seq`) WHERE account_id IS NOT NULL;
