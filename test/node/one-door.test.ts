import { readdirSync, readFileSync } from "node:fs";
import { posix } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The one door's shape, read from the sources (docs/architecture.md, "One door"): the live and sandbox implementations
 * of KeyData are picked in one place, keyDataFor (src/key-data/pick.ts), which the request pipeline calls once
 * admission has admitted a key and an export's runner calls with the export's environment. Exports read nothing of the
 * sandbox nor of the live implementation but through the door, and choose nothing by environment themselves.
 */

const src = new URL("../../src/", import.meta.url);
const files = readdirSync(src, { recursive: true, encoding: "utf8" })
  .filter((file) => /\.ts$/.test(file) && !file.endsWith(".d.ts"))
  .map((file) => `src/${file.split("\\").join("/")}`);
const texts = new Map(files.map((file) => [file, readFileSync(new URL(file.slice("src/".length), src), "utf8")]));

/** The src files a file imports (static, dynamic and re-exports; type-only ones too), as paths from the repository. */
function importsOf(file: string): string[] {
  const specifiers = [...texts.get(file)!.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)"(\.{1,2}\/[^"]+)"/g)].map((m) => m[1]!);
  return specifiers.map((specifier) => posix.normalize(posix.join(posix.dirname(file), specifier)));
}

/** The files importing any of `targets` (a path, or a folder ending in /). */
const importersOf = (...targets: string[]) =>
  files.filter((file) =>
    importsOf(file).some((imported) =>
      targets.some((target) => (target.endsWith("/") ? imported.startsWith(target) : imported === target)),
    ),
  );

describe("the one door", () => {
  it("picks the live or the sandbox implementation in keyDataFor alone", () => {
    expect(importersOf("src/key-data/live.ts", "src/key-data/sandbox.ts")).toEqual(["src/key-data/pick.ts"]);
    expect(importersOf("src/key-data/live-export.ts")).toEqual(["src/key-data/live.ts"]);
  });

  it("is picked by the request pipeline, after admission, and by an export's runner, and nowhere else", () => {
    expect(importersOf("src/key-data/pick.ts").sort()).toEqual(["src/exports/runner.ts", "src/pipeline/key-data.ts"]);
  });

  it("is all an export reads: src/exports/ imports nothing of the sandbox or of the live implementation, and does not branch on environment", () => {
    const exportsFiles = files.filter((file) => file.startsWith("src/exports/"));
    expect(exportsFiles.length).toBeGreaterThan(0);
    const reaching = exportsFiles.filter((file) =>
      importsOf(file).some(
        (imported) => imported.startsWith("src/sandbox/") || /^src\/key-data\/(live|live-export|sandbox)\.ts$/.test(imported),
      ),
    );
    expect(reaching).toEqual([]);
    const branching = exportsFiles.filter((file) => /environment\s*[!=]==?|===?\s*"(test|live)"/.test(texts.get(file)!));
    expect(branching).toEqual([]);
  });
});
