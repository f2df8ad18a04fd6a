/**
 * A Worker invocation has at most 6 connections open at once (fetches, R2, queue sends, calls to Durable
 * Objects); a seventh waits for one while its own timeout runs. Work that fans out runs this many at a time.
 */
export const MAX_OPEN_CONNECTIONS = 6;
