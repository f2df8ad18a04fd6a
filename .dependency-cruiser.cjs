/**
 * The layer map of docs/architecture.md, enforced by `npm run layers` (part of `npm run check`);
 * import cycles are `npm run cycles`. From the bottom:
 *   platform/ → http/ → auth/, rate-limit/ → operation/ → resource folders (every other folder, api-keys/ among them)
 *   → the app (src/app.ts, src/index.ts, pipeline/, dashboard/, docs/).
 * A file may import its own folder and any layer below, never a layer above. Type-only imports are exempt:
 * they are erased at build, and http/app-env.ts must name the services the request context carries.
 */
const LOWER = ["platform", "http", "auth|rate-limit", "operation"];
const APP = ["^src/(dashboard|docs|pipeline)/", "^src/(app|index)\\.ts$"];
const RESOURCE = `^src/(?!(?:${LOWER.join("|")}|dashboard|docs|pipeline)/)[^/]+/`;

/** Everything above layer `i` of LOWER: the higher lower layers, every resource folder, the app. */
const aboveLayer = (i) => [...LOWER.slice(i + 1).map((folders) => `^src/(${folders})/`), RESOURCE, ...APP];

module.exports = {
  forbidden: [
    ...LOWER.map((folders, i) => ({
      name: `layer-${folders.replace("|", "-and-")}`,
      comment: `src/${folders}/ imports only the layers below it.`,
      severity: "error",
      from: { path: `^src/(${folders})/` },
      to: {
        path: [...aboveLayer(i), ...(folders.includes("|") ? [`^src/(${folders})/`] : [])],
        // auth/ and rate-limit/ are siblings: neither imports the other.
        pathNot: "^src/$1/",
        dependencyTypesNot: ["type-only"],
      },
    })),
    {
      name: "layer-resources",
      comment: "A resource folder imports the layers below and other resources, never the app.",
      severity: "error",
      from: { path: RESOURCE },
      to: { path: APP, dependencyTypesNot: ["type-only"] },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    exclude: { path: ["\\.gen\\.js$", "^src/platform/worker-env\\.d\\.ts$"] },
  },
};
