import { env } from "cloudflare:workers";
import { vi } from "vitest";

/**
 * The worker's side of the tests' lake (test/helpers/lake-server.ts): the S3 server runs on this machine, which the
 * webhooks' URL policy refuses (127.0.0.1, http://) as it must, so an export names it as https://s3.test, and the
 * worker's outbound fetch (the tests share its isolate) carries a request to that host to the real server on
 * 127.0.0.1, method, headers (the SigV4 signature among them) and body as they are, as webhook receivers are stood in
 * for (test/helpers/webhook-receiver.ts). Every other request goes out as it would.
 */

const LAKE_ENDPOINT = "https://s3.test";
const lake = () => JSON.parse(env.TEST_LAKE) as { s3: string; duckdb: string };

/** The destination of an export into the lake's bucket, under `prefix`. */
export const lakeDestination = (prefix: string) => ({
  type: "s3",
  endpoint: LAKE_ENDPOINT,
  bucket: "lake",
  prefix,
  region: "us-east-1",
  access_key_id: "S3RVER",
  secret_access_key: "S3RVER",
});

/** Routes https://s3.test to the lake's S3 server; `fail(url)` may answer a request itself (an outage). */
export function connectLake(fail: (url: string) => Response | undefined = () => undefined): { uploads: string[] } {
  const realFetch = globalThis.fetch;
  const uploads: string[] = [];
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const request = new Request(input, init);
    if (!request.url.startsWith(`${LAKE_ENDPOINT}/`)) return realFetch(input, init);
    uploads.push(`${request.method} ${new URL(request.url).pathname}`);
    const failed = fail(request.url);
    if (failed) return failed;
    const headers = new Headers(request.headers);
    headers.delete("host");
    const body = request.method === "GET" || request.method === "HEAD" ? undefined : await request.arrayBuffer();
    return realFetch(request.url.replace(LAKE_ENDPOINT, lake().s3), { method: request.method, headers, body });
  });
  return { uploads };
}

/** DuckDB's answer to `sql` over the Parquet files under `prefix` in the lake's bucket (`{files}` names them, Hive-partitioned and by name; `{root}` is their directory). */
export async function duckdb<Row = Record<string, unknown>>(prefix: string, sql: string): Promise<Row[]> {
  const answer = await fetch(lake().duckdb, { method: "POST", body: JSON.stringify({ prefix, sql }) });
  const body = (await answer.json()) as { rows?: Row[]; error?: string };
  if (!answer.ok) throw new Error(`DuckDB: ${body.error}`);
  return body.rows!;
}
