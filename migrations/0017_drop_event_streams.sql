-- The event streams are counted by their hubs (src/stream/hub.ts): no row per stream.
DROP TABLE `event_streams`;
