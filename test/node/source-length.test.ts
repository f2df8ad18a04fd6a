import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/**
 * docs/architecture.md's rule on a source file's length, measured: no TypeScript or JavaScript file in src/ (generated ones aside) is over
 * 400 lines. Past 300 a file usually does two jobs; past 400 it must be split.
 */
const LIMIT = 400;
const src = new URL("../../src/", import.meta.url);

describe("source files", () => {
  it(`are at most ${LIMIT} lines each`, () => {
    const files = readdirSync(src, { recursive: true, encoding: "utf8" }).filter(
      (file) => /\.(ts|js)$/.test(file) && !file.includes(".gen."),
    );
    const lengths = files.map((file) => ({ file, lines: readFileSync(new URL(file, src), "utf8").trimEnd().split("\n").length }));
    const tooLong = lengths.filter(({ lines }) => lines > LIMIT).map(({ file, lines }) => `src/${file}: ${lines} lines`);
    expect(tooLong).toEqual([]);
  });
});

/** The test run's configuration says which projects run what; the stand-in servers and the output filter are helpers' (test/helpers/). */
const CONFIG_LIMIT = 150;

describe("vitest.config.ts", () => {
  it(`is at most ${CONFIG_LIMIT} lines, and starts no server and patches no stream itself`, () => {
    const config = readFileSync(new URL("../../vitest.config.ts", import.meta.url), "utf8");
    expect(config.trimEnd().split("\n").length).toBeLessThanOrEqual(CONFIG_LIMIT);
    expect(config).not.toMatch(/createServer|\.write = /);
  });
});
