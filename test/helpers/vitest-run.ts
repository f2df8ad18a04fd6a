import { readFile } from "node:fs/promises";
import { ABORTED_FOR_THE_NEXT_FILE, RESTARTED_BY_THE_TEST } from "./abort-reason.ts";

/** What vitest.config.ts does to a run besides its projects: which projects it runs, and the output it leaves out. */

/**
 * The projects this run selects (`--project a --project b` or `--project=a`); none named means every project. Only the
 * workers and chaos projects run the worker under test, so only they need its generated assets and the stand-in
 * servers: `npm test -- --project node` (or `npm run test:e2e`) bundles nothing and starts no server here.
 */
export function selectedProjects(argv = process.argv): Set<string> | "all" {
  const names = new Set<string>();
  argv.forEach((arg, i) => {
    if (arg === "--project") names.add(argv[i + 1] ?? "");
    else if (arg.startsWith("--project=")) names.add(arg.slice("--project=".length));
  });
  return names.size === 0 ? "all" : names;
}

/**
 * Some dependencies publish source maps that name sources they do not publish (the MCP SDK's src/, standardwebhooks'),
 * so Vite warns once per file, in every run, that they are missing. Loaded without their maps, dependencies read the
 * same and their stack frames point at the published files.
 */
export const dependenciesWithoutSourceMaps = {
  name: "dependencies-without-source-maps",
  async load(id: string) {
    if (!id.includes("/node_modules/") || !/\.[cm]?js$/.test(id)) return null;
    return { code: (await readFile(id, "utf8")).replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n"), map: null };
  },
};

/**
 * Two notes workerd writes that say nothing about a test. The pool prints workerd's lines as they come (on stdout or
 * stderr, by level) and offers no filter, so these are dropped here; every other line prints.
 * - "SQLite alarm handler canceled with requestScheduledAlarm", each time the catalogue builder's alarm handler re-arms
 *   its own alarm (its steps do, by design).
 * - "uncaught exception; … jsg.Error: <ABORTED_FOR_THE_NEXT_FILE>" and the "stack:" line after it, each time a shared
 *   Durable Object is aborted between two test files (test/helpers/fresh-storage.ts), and the same for
 *   <RESTARTED_BY_THE_TEST>, each time a test restarts an object (test/api-keys/reservations.test.ts).
 */
export function dropRoutineWorkerdNotes(): void {
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
    let afterAbortNote = false;
    const routine = (line: string) => {
      const abortNote = line.includes(ABORTED_FOR_THE_NEXT_FILE) || line.includes(RESTARTED_BY_THE_TEST);
      const dropped =
        line.includes("alarm handler canceled with requestScheduledAlarm") || abortNote || (afterAbortNote && line.startsWith("stack: "));
      afterAbortNote = abortNote;
      return dropped;
    };
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (typeof chunk !== "string" || !chunk.includes("workerd")) return write(chunk, ...rest);
      const kept = chunk.split(/(?<=\n)/).filter((line) => !routine(line));
      return kept.length === 0 ? true : write(kept.join(""), ...rest);
    }) as typeof stream.write;
  }
}
