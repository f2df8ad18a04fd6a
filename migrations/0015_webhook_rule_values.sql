-- The fan-out reads only the webhooks that may match a batch's events (docs/webhooks.md, "Who a batch reads"): each
-- enabled webhook is filed under the values of its list rules (kind = competitors, brands, categories, skus), or, when
-- it has none, under its event types (kind = events). `lists` is how many lists it is filed under, so a batch knows a
-- webhook passed every one of them; it is in the key so that single-list webhooks are found without the per-event count. A view says what the rows of a webhook are, once; triggers keep the rows in step
-- in the same statement as every write of a webhook's events, filters or status (a disabled webhook has none), and
-- the foreign key drops them with it.
CREATE TABLE `webhook_rule_values` (
	`webhook_id` text NOT NULL,
	`kind` text NOT NULL,
	`value` text NOT NULL,
	`lists` integer NOT NULL,
	PRIMARY KEY(`kind`, `value`, `lists`, `webhook_id`),
	FOREIGN KEY (`webhook_id`) REFERENCES `webhooks`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `webhook_rule_values_webhook` ON `webhook_rule_values` (`webhook_id`);
--> statement-breakpoint
CREATE VIEW `webhook_rule_rows` AS
  SELECT w.id AS webhook_id, list.key AS kind, entry.value AS value,
    (SELECT count(*) FROM json_each(w.filters) l WHERE l.key IN ('competitors', 'brands', 'categories', 'skus')) AS lists
  FROM webhooks w, json_each(w.filters) list, json_each(list.value) entry
  WHERE w.status = 'enabled' AND list.key IN ('competitors', 'brands', 'categories', 'skus')
  UNION
  SELECT w.id, 'events', type.value, 0
  FROM webhooks w, json_each(w.events) type
  WHERE w.status = 'enabled'
    AND NOT EXISTS (SELECT 1 FROM json_each(w.filters) l WHERE l.key IN ('competitors', 'brands', 'categories', 'skus'));
--> statement-breakpoint
CREATE TRIGGER `webhook_rule_values_insert` AFTER INSERT ON `webhooks` WHEN new.status = 'enabled' BEGIN
  INSERT INTO `webhook_rule_values` (webhook_id, kind, value, lists) SELECT * FROM `webhook_rule_rows` WHERE webhook_id = new.id;
END;
--> statement-breakpoint
CREATE TRIGGER `webhook_rule_values_update` AFTER UPDATE OF events, filters, status ON `webhooks` BEGIN
  DELETE FROM `webhook_rule_values` WHERE webhook_id = old.id;
  INSERT INTO `webhook_rule_values` (webhook_id, kind, value, lists) SELECT * FROM `webhook_rule_rows` WHERE webhook_id = new.id;
END;
--> statement-breakpoint
INSERT INTO `webhook_rule_values` (webhook_id, kind, value, lists) SELECT * FROM `webhook_rule_rows`;
