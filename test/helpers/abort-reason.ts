/**
 * The reason test/helpers/fresh-storage.ts aborts the shared Durable Objects with, between test files. workerd logs each
 * abort; vitest.config.ts leaves those lines out of the output by this reason.
 */
export const ABORTED_FOR_THE_NEXT_FILE = "emptied for the next test file";
