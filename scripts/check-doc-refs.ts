/**
 * `npm run doc-refs` (part of `npm run check`): fails when a path cited in the docs or in a code comment names
 * nothing. It reads every repository path (src/…, test/…, docs/…, scripts/…, bench/…, migrations/…, client/…) in
 * README.md, docs/**\/*.md and the comments of src/, test/, scripts/ and bench/, and every relative Markdown link.
 * A path counts when it exists, or when .gitignore names it (generated files such as src/dashboard/assets.gen.js
 * exist only after a build). docs/records/ is left out: it is dated history, citing the files of its day.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const TOP_FOLDERS = ["src", "test", "docs", "scripts", "bench", "migrations", "client"];
// A path starts at a top folder not preceded by a path or word character (so not inside a URL or another path).
const CITED_PATH = new RegExp(`(?<![\\w./@-])(?:${TOP_FOLDERS.join("|")})/[\\w./<>*{}-]*`, "g");
const MARKDOWN_LINK = /\]\(([^)\s]+)\)/g;

/** The files under `folder` (relative to the root) whose names end with one of `extensions`. */
function filesUnder(folder: string, extensions: string[]): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) {
        if (entry.name !== "node_modules" && !entry.name.startsWith(".")) walk(path);
      } else if (extensions.some((ext) => entry.name.endsWith(ext))) found.push(path);
    }
  };
  if (existsSync(join(root, folder))) walk(folder);
  return found;
}

/** The comments of a TypeScript or JavaScript file: `//` to the end of its line, and `/* … *\/` blocks. */
function commentsOf(source: string): string {
  const comments: string[] = [];
  for (const [block] of source.matchAll(/\/\*[\s\S]*?\*\//g)) comments.push(block);
  for (const line of source.replace(/\/\*[\s\S]*?\*\//g, "").split("\n")) {
    const at = line.search(/(?<![:"'`\\])\/\/(?!\/)/); // not a URL's `://`, not inside an obvious string start
    if (at >= 0) comments.push(line.slice(at));
  }
  return comments.join("\n");
}

const ignored = readFileSync(join(root, ".gitignore"), "utf8")
  .split("\n")
  .map((line) => line.trim().replace(/\/$/, ""))
  .filter((line) => line && !line.startsWith("#"));

function exists(path: string): boolean {
  const clean = path.replace(/\/$/, "");
  if (existsSync(join(root, clean)) || ignored.some((entry) => clean === entry || clean.startsWith(`${entry}/`))) return true;
  // A migration cited by its number (migrations/0015) names migrations/0015_<name>.sql.
  const [, folder, number] = /^(migrations)\/(\d{4})$/.exec(clean) ?? [];
  return folder !== undefined && readdirSync(join(root, folder)).some((name) => name.startsWith(`${number}_`));
}

/** Each cited path of `text` that names nothing. */
function missingIn(file: string, text: string, markdown: boolean): string[] {
  const missing = new Set<string>();
  for (const [match] of text.matchAll(CITED_PATH)) {
    if (/[<>*{}]/.test(match)) continue; // a pattern (test/<resource>/, bench/*.ts), not one path
    const path = match.replace(/[.]+$/, "");
    if (!exists(path)) missing.add(path);
  }
  if (markdown) {
    for (const [, target] of text.matchAll(MARKDOWN_LINK)) {
      if (/^[a-z][\w+.-]*:|^#|^\//i.test(target!)) continue; // a URL, an anchor on the page, a site path
      const path = relative(root, join(root, dirname(file), target!.split("#")[0]!));
      if (!exists(path)) missing.add(`${path} (link)`);
    }
  }
  return [...missing];
}

const sources = [
  // docs/records/ is dated history: it cites the files of its day, which may since have moved.
  ...["README.md", ...filesUnder("docs", [".md"]).filter((file) => !file.startsWith("docs/records/"))].map((file) => ({
    file,
    markdown: true,
  })),
  ...["src", "test", "scripts", "bench"].flatMap((folder) =>
    filesUnder(folder, [".ts", ".js", ".cjs", ".mjs"])
      .filter((file) => !file.endsWith(".gen.js") && statSync(join(root, file)).size < 1_000_000)
      .map((file) => ({ file, markdown: false })),
  ),
];
const problems = sources.flatMap(({ file, markdown }) => {
  const text = readFileSync(join(root, file), "utf8");
  return missingIn(file, markdown ? text : commentsOf(text), markdown).map((path) => `${file}: ${path}`);
});
if (problems.length > 0) {
  console.error(`Cited paths that name nothing (fix the citation, or the file moved):\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`check-doc-refs: every path cited in ${sources.length} files exists.`);
