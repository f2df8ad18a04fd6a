/** docs/benchmark.md's results section, which a full `npm run bench` rewrites (a quick run leaves it alone). */
export const RESULTS_START = "<!-- bench:results:start (written by `npm run bench`; edits between these markers are replaced) -->";
export const RESULTS_END = "<!-- bench:results:end -->";

/** `doc` (docs/benchmark.md) with the text between its result markers replaced by `results`. */
export function withResults(doc: string, results: string): string {
  const start = doc.indexOf(RESULTS_START);
  const end = doc.indexOf(RESULTS_END);
  if (start < 0 || end < start) throw new Error(`docs/benchmark.md has lost its markers; put back ${RESULTS_START} and ${RESULTS_END}`);
  return `${doc.slice(0, start + RESULTS_START.length)}\n\n${results.trim()}\n\n${doc.slice(end)}`;
}
