import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { RESULTS_END, RESULTS_START, withResults } from "../../bench/report/results-doc.ts";

/** `npm run bench` rewrites only the results section of docs/benchmark.md. */
describe("the benchmark document", () => {
  it("has its result markers, and a full run's report replaces only what is between them", () => {
    const doc = readFileSync(new URL("../../docs/benchmark.md", import.meta.url), "utf8");
    const updated = withResults(doc, "### Benchmark (new run)\n\n| a | b |");
    const [before, after] = [doc.slice(0, doc.indexOf(RESULTS_START)), doc.slice(doc.indexOf(RESULTS_END))];
    expect(updated.startsWith(before + RESULTS_START)).toBe(true);
    expect(updated.endsWith(after)).toBe(true);
    expect(updated).toContain(`${RESULTS_START}\n\n### Benchmark (new run)\n\n| a | b |\n\n${RESULTS_END}`);
    expect(withResults(updated, "second")).toBe(withResults(doc, "second"));
  });

  it("refuses a document whose markers are gone rather than append to it", () => {
    expect(() => withResults("# Benchmark\n", "results")).toThrow(/lost its markers/);
  });
});
