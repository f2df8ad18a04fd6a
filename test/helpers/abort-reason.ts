/**
 * The reason test/helpers/fresh-storage.ts aborts the shared Durable Objects with, between test files. workerd logs each
 * abort; vitest.config.ts leaves those lines out of the output by this reason (test/helpers/vitest-run.ts).
 */
export const ABORTED_FOR_THE_NEXT_FILE = "emptied for the next test file";

/** The reason a test restarts a Durable Object with (its memory dropped, its storage kept); left out of the output too. */
export const RESTARTED_BY_THE_TEST = "restarted by the test";
