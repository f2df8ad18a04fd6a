/**
 * The layer map of docs/architecture.md, enforced by `npm run layers` (part of `npm run check`);
 * import cycles between files are `npm run cycles`. From the bottom:
 *   platform/ → http/ → auth/, rate-limit/ → operation/ → resource folders (every other folder, api-keys/ among them)
 *   → the app (src/app.ts, src/index.ts, pipeline/, dashboard/, docs/).
 * A file may import its own folder and any layer below, never a layer above. Type-only imports are exempt:
 * they are erased at build, and http/app-env.ts must name the services the request context carries.
 * The resource folders stand in tiers of their own (RESOURCE_TIERS): a folder imports only folders of lower tiers, so
 * no two resource folders import each other, directly or round a longer loop.
 */
const LOWER = ["platform", "http", "auth|rate-limit", "operation"];
/** From the bottom; folders of one tier do not import each other. A new resource folder must be placed here. */
const RESOURCE_TIERS = [
  ["events", "api-keys", "fx-rates"],
  ["account-events", "alerts", "connect", "accounts"],
  ["catalogue", "webhooks", "secret-scanning"],
  ["observations"],
  ["sandbox"],
  ["key-data", "stream"],
  ["exports", "mcp"],
];
const folders = (tiers) => `^src/(${tiers.flat().join("|")})/`;
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
    ...RESOURCE_TIERS.map((tier, i) => ({
      name: `resource-tier-${i + 1}`,
      comment: `src/${tier.join("/, src/")}/ import only resource folders of lower tiers (no cycle between resource folders).`,
      severity: "error",
      from: { path: folders([tier]) },
      to: { path: folders(RESOURCE_TIERS.slice(i)), pathNot: "^src/$1/", dependencyTypesNot: ["type-only"] },
    })),
    {
      name: "observations-deliver-nothing",
      comment: "An ingestion commits events and hands them on (src/pipeline/after-commit.ts): it never names a delivery mechanism.",
      severity: "error",
      from: { path: "^src/observations/" },
      to: { path: "^src/(stream|webhooks)/" },
    },
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
