-- search_products' text search (src/mcp/tools.ts): an FTS5 index of products' name, brand and SKU with the
-- trigram tokenizer, so a text of 3 or more characters finds every product holding it anywhere in those
-- fields (case-insensitive) through the index instead of a scan of the table. External content: the index
-- holds no copy of the text, the triggers below keep it in step with products (an update only when one of
-- the three actually changes, so ingestion's upserts of unchanged products cost nothing more).
CREATE VIRTUAL TABLE `products_search` USING fts5(name, brand, sku, content='products', content_rowid='rowid', tokenize='trigram');--> statement-breakpoint
INSERT INTO `products_search` (`products_search`) VALUES ('rebuild');--> statement-breakpoint
CREATE TRIGGER `products_search_insert` AFTER INSERT ON `products` BEGIN
  INSERT INTO `products_search` (rowid, name, brand, sku) VALUES (new.rowid, new.name, new.brand, new.sku);
END;--> statement-breakpoint
CREATE TRIGGER `products_search_delete` AFTER DELETE ON `products` BEGIN
  INSERT INTO `products_search` (`products_search`, rowid, name, brand, sku) VALUES ('delete', old.rowid, old.name, old.brand, old.sku);
END;--> statement-breakpoint
CREATE TRIGGER `products_search_update` AFTER UPDATE OF name, brand, sku ON `products`
  WHEN old.name IS NOT new.name OR old.brand IS NOT new.brand OR old.sku IS NOT new.sku BEGIN
  INSERT INTO `products_search` (`products_search`, rowid, name, brand, sku) VALUES ('delete', old.rowid, old.name, old.brand, old.sku);
  INSERT INTO `products_search` (rowid, name, brand, sku) VALUES (new.rowid, new.name, new.brand, new.sku);
END;
