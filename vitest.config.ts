import { randomBytes } from "node:crypto";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { buildDashboard } from "./scripts/build-dashboard.ts";
import { buildDocs } from "./scripts/build-docs.ts";
import { serveTestJwks } from "./test/helpers/idp-server.ts";
import { serveLake } from "./test/helpers/lake-server.ts";
import { serveSecretScanningKeys } from "./test/helpers/secret-scanning-server.ts";
import { dependenciesWithoutSourceMaps, dropRoutineWorkerdNotes, selectedProjects } from "./test/helpers/vitest-run.ts";

/**
 * The test projects: node (plain Node), workers and chaos (the worker under test in workerd, with stand-in servers for
 * the identity provider, GitHub's secret-scanning keys and the customer's lake: test/helpers/idp-server.ts,
 * test/helpers/secret-scanning-server.ts, test/helpers/lake-server.ts), e2e and dev.
 */

export default defineConfig(async () => {
  const selected = selectedProjects();
  const runsTheWorker = Boolean(process.env.CHAOS) || selected === "all" || selected.has("workers");
  // Pure logic and Node tools' checks (test/node/ and test/**/*.node.test.ts): plain Node, no worker, no binding.
  const node = {
    test: {
      name: "node",
      include: ["test/node/**/*.test.ts", "test/**/*.node.test.ts"],
      environment: "node",
    },
  };
  // The dashboard in a real browser (test/e2e/): plain Node; it starts `wrangler dev` and an IdP on 8787 and 4000.
  // `npm run test:e2e`, with the dev-server project after it.
  const e2e = {
    test: {
      name: "e2e",
      include: ["test/e2e/**/*.test.ts"],
      environment: "node",
      testTimeout: 180_000,
      hookTimeout: 120_000,
      // A page load after a silent sign-in can take seconds on a loaded machine; poll for longer than the default 1 s.
      expect: { poll: { timeout: 15_000 } },
      // Each file starts its own IdP and worker on the same ports (test/e2e/harness.ts): one file at a time.
      fileParallelism: false,
      sequence: { groupOrder: 1 },
    },
  };
  // `npm run dev` itself, called on its ports as a user calls it (test/dev/): after the browser test, which binds the same ports.
  const dev = {
    test: {
      name: "dev",
      include: ["test/dev/**/*.test.ts"],
      environment: "node",
      testTimeout: 60_000,
      hookTimeout: 240_000,
      sequence: { groupOrder: 2 },
    },
  };
  const test = {
    // Four test files at once, whatever the core count (Vitest's default is one fewer than the cores: one, here). A
    // workers file spends most of its time waiting (modules fetched into workerd, D1 and Durable Object calls, the
    // work-budget test's quiet seconds), so others overlap it: on two cores, two at once took about a third off the
    // workers project's wall time, and four about a tenth more (153 → 138 s in two runs on the same load).
    maxWorkers: 4,
    // The code's routine info lines (a snapshot built, …) say nothing about a test; its warnings and errors still
    // print, except where a test causes them on purpose and checks them (test/helpers/logs.ts), and the OAuth library's
    // note at load that Client ID Metadata Documents are off, which they are by choice (docs/decisions.md).
    onConsoleLog: (log: string) => !log.startsWith('{"level":"info"') && !log.startsWith("CIMD (Client ID Metadata Document) is disabled"),
  };
  if (!runsTheWorker) return { test: { ...test, projects: [e2e, node, dev] } };

  // Wrangler's own info lines ("Using secrets defined in .dev.vars", once per test file) say nothing about a test.
  process.env.WRANGLER_LOG ??= "warn";
  dropRoutineWorkerdNotes();
  await buildDashboard(); // src/dashboard/assets.gen.js, which the worker imports
  buildDocs(); // src/docs/assets.gen.js, likewise
  const idp = await serveTestJwks();
  const secretScanning = await serveSecretScanningKeys();
  const lake = await serveLake();
  const migrations = await readD1Migrations("./migrations");
  const alertsMigrations = await readD1Migrations("./migrations-alerts");
  /** The worker under test, with the tests' bindings (and `extra` ones). */
  const workerPlugin = (extra: Record<string, string> = {}) =>
    cloudflareTest({
      wrangler: { configPath: "./wrangler.toml" },
      miniflare: {
        bindings: {
          IDP_ISSUER: "https://idp.test/",
          IDP_AUDIENCE: "price-data-api",
          IDP_JWKS_URL: idp.jwksUrl,
          EXPOSE_WORK_COUNTS: "true",
          // A fresh key per run; "false" explicitly, whatever a local .dev.vars says.
          WEBHOOK_SECRET_KEY: randomBytes(32).toString("base64"),
          WEBHOOK_ALLOW_INSECURE_URLS: "false",
          TEST_SIGNING_JWK: JSON.stringify(idp.privateJwk),
          TEST_PUBLIC_JWK: JSON.stringify(idp.publicJwk),
          TEST_MIGRATIONS: migrations,
          TEST_ALERTS_MIGRATIONS: alertsMigrations,
          SECRET_SCANNING_KEYS_URL: `${secretScanning.origin}/keys`,
          TEST_SECRET_SCANNING: JSON.stringify(secretScanning),
          TEST_LAKE: JSON.stringify(lake),
          ...extra,
        },
      },
    });
  const workers = {
    plugins: [workerPlugin(), dependenciesWithoutSourceMaps],
    test: {
      name: "workers",
      include: ["test/**/*.test.ts"],
      exclude: ["test/e2e/**", "test/node/**", "test/**/*.node.test.ts", "test/chaos/**", "test/dev/**"],
      setupFiles: ["./test/helpers/setup.ts"],
      // Two files at once on two busy cores can take a request past Vitest's 5 s default; no test asserts a time.
      testTimeout: 20_000,
      // The files share four runtimes, one after another in each, instead of a runtime started per file (most of the
      // run's CPU); test/helpers/fresh-storage.ts starts each file from nothing all the same.
      isolate: false,
    },
  };
  // `npm run chaos` (CHAOS=1): fault injection on the outbox and the deliveries (test/chaos/). Not part of `npm test`;
  // CHAOS_CHANGES sets how many price changes it ingests (default 400, about half a minute).
  const chaos = {
    plugins: [workerPlugin({ CHAOS_CHANGES: process.env.CHAOS_CHANGES ?? "400" }), dependenciesWithoutSourceMaps],
    test: {
      name: "chaos",
      include: ["test/chaos/**/*.test.ts"],
      setupFiles: ["./test/helpers/setup.ts"],
      testTimeout: 3_600_000,
    },
  };
  return { test: { ...test, projects: process.env.CHAOS ? [chaos] : [workers, e2e, node, dev] } };
});
