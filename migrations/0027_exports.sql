CREATE TABLE `exports` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`environment` text NOT NULL,
	`kind` text NOT NULL,
	`format` text NOT NULL,
	`since` text,
	`until` text,
	`schedule` text,
	`destination` text,
	`secret_ciphertext` text,
	`status` text NOT NULL,
	`rows` integer DEFAULT 0 NOT NULL,
	`files` integer DEFAULT 0 NOT NULL,
	`bytes` integer DEFAULT 0 NOT NULL,
	`error` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `exports_account_created` ON `exports` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `exports_due` ON `exports` (`status`,`schedule`,`until`);