import { generateKeyPairSync, randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { exportJWK, generateKeyPair } from "jose";
import { defineConfig } from "vitest/config";
import { buildDashboard } from "./scripts/build-dashboard.ts";
import { buildDocs } from "./scripts/build-docs.ts";
import { ABORTED_FOR_THE_NEXT_FILE, RESTARTED_BY_THE_TEST } from "./test/helpers/abort-reason.ts";
import { serveLake } from "./test/helpers/lake-server.ts";

/**
 * A stand-in identity provider for the tests: a fresh RS256 key pair whose public half is served
 * as a JWKS over real HTTP, so the worker fetches and caches it exactly as it would an IdP's.
 * The private half reaches the tests as a binding, and test/helpers/tokens.ts signs with it.
 * `/switchable/<name>/jwks.json` serves the same set but can be taken down: POST `…/down` makes it
 * answer 503 until POST `…/up`; GET `…/fetches` counts the key-set fetches it had (test/auth/jwks-outage.test.ts).
 * A name per test, so test files running at once never see each other's outage. `/two-keys/jwks.json` serves a set of
 * two RS256 keys, another one's first and then the test IdP's, as an IdP mid-rotation does (test/auth/jwt-without-kid.test.ts).
 */
async function serveTestJwks() {
  const { publicKey, privateKey } = await generateKeyPair("RS256", { extractable: true });
  const kid = "test-key-1";
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" };
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: "RS256" };
  const body = JSON.stringify({ keys: [publicJwk] });
  const other = await generateKeyPair("RS256", { extractable: true });
  const twoKeys = JSON.stringify({
    keys: [{ ...(await exportJWK(other.publicKey)), kid: "test-key-0", alg: "RS256", use: "sig" }, publicJwk],
  });
  const switchable = new Map<string, { down: boolean; fetches: number }>();
  const server = createServer((req, res) => {
    const json = (status: number, text: string) => res.writeHead(status, { "Content-Type": "application/json" }).end(text);
    if (req.url === "/jwks.json") return json(200, body);
    if (req.url === "/two-keys/jwks.json") return json(200, twoKeys);
    const [, name, action] = /^\/switchable\/([\w-]+)\/(jwks\.json|down|up|fetches)$/.exec(req.url ?? "") ?? [];
    if (!name) return res.writeHead(404).end();
    const state = switchable.get(name) ?? { down: false, fetches: 0 };
    switchable.set(name, state);
    if (action === "jwks.json") {
      state.fetches++;
      return state.down ? json(503, '{"error":"the identity provider is down"}') : json(200, body);
    }
    if (action === "fetches") return json(200, String(state.fetches));
    state.down = action === "down";
    return json(200, "{}");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  server.unref();
  const { port } = server.address() as AddressInfo;
  return { jwksUrl: `http://127.0.0.1:${port}/jwks.json`, publicJwk, privateJwk };
}

/**
 * A stand-in for GitHub's secret-scanning key list: an ECDSA P-256 key pair whose public half is served over
 * real HTTP as GitHub serves its list, so the worker fetches and caches it as it would GitHub's. The
 * private half reaches the tests as a binding (test/helpers/secret-scanning.ts signs with it). The tests
 * can add keys to the list (POST, a PEM) and read how often it was fetched, to test rotation and refetching.
 */
async function serveSecretScanningKeys() {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const keys = [
    { key_identifier: "test-secret-scanning-1", key: publicKey.export({ type: "spki", format: "pem" }).toString(), is_current: true },
  ];
  let fetches = 0;
  const server = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/keys") {
      fetches++;
      res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ public_keys: keys }));
    } else if (req.method === "POST" && req.url === "/keys") {
      let body = "";
      req
        .on("data", (chunk) => (body += chunk))
        .on("end", () => {
          keys.push({ ...JSON.parse(body), is_current: false });
          res.writeHead(204).end();
        });
    } else if (req.url === "/fetches") {
      res.writeHead(200, { "Content-Type": "application/json" }).end(String(fetches));
    } else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  server.unref();
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    identifier: keys[0]!.key_identifier,
    privateJwk: privateKey.export({ format: "jwk" }),
  };
}

/**
 * The projects this run selects (`--project a --project b` or `--project=a`); none named means every project. Only the
 * workers and chaos projects run the worker under test, so only they need its generated assets and the stand-in
 * servers: `npm test -- --project node` (or `npm run test:e2e`) bundles nothing and starts no server here.
 */
function selectedProjects(argv = process.argv): Set<string> | "all" {
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
const dependenciesWithoutSourceMaps = {
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
function dropRoutineWorkerdNotes(): void {
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
