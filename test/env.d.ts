import type { D1Migration } from "cloudflare:test";

// The worker's own bindings come from src/platform/worker-env.d.ts (`npm run types`); these are the tests' extras.
declare global {
  namespace Cloudflare {
    interface Env {
      TEST_SIGNING_JWK: string;
      TEST_PUBLIC_JWK: string;
      TEST_MIGRATIONS: D1Migration[];
      /** migrations-alerts/, the alert windows' own database's (ALERTS_DB). */
      TEST_ALERTS_MIGRATIONS: D1Migration[];
      /** The stand-in for GitHub's secret-scanning key list (test/helpers/secret-scanning-server.ts): its origin, the served key's identifier and private JWK. */
      TEST_SECRET_SCANNING: string;
      /** The customer's lake on this machine (test/helpers/lake-server.ts): `{s3, duckdb}`, the S3 server's origin and the query endpoint. */
      TEST_LAKE: string;
      /** `npm run chaos` only: how many price changes to ingest. */
      CHAOS_CHANGES?: string;
    }
  }
}
