import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { AwsClient } from "aws4fetch";
import S3rver from "s3rver";

/**
 * A customer's lake on this machine, for the exports' tests (test/exports/lake.test.ts), started by vitest.config.ts
 * beside the worker under test:
 * - a real S3-compatible server (s3rver) with a bucket `lake`, credentials S3RVER/S3RVER;
 * - a query engine reading that bucket as a data team would: POST /duckdb {prefix, sql} downloads every object under
 *   the prefix through the S3 API (ListObjectsV2, GetObject, signed with SigV4) into a directory of its own, keys as
 *   paths, and runs `sql` in DuckDB, where `{files}` stands for every Parquet file read with Hive partitioning, by
 *   name, and `{root}` for the prefix's directory (one file: `read_parquet('{root}date=…/part-00001.parquet')`). The
 *   answer is the rows as JSON.
 * The worker reaches the S3 server through the tests' stand-in host (https://s3.test, test/helpers/lake.ts): the
 * webhooks' URL policy refuses 127.0.0.1, as it must. The request is signed for that host, so this server is told to
 * accept a well-formed signature that does not match the host it sees (allowMismatchedSignatures).
 */
export async function serveLake(): Promise<{ s3: string; duckdb: string }> {
  const directory = await mkdtemp(join(tmpdir(), "lake-s3-"));
  const s3rver = new S3rver({
    address: "127.0.0.1",
    port: 0,
    silent: true,
    directory,
    resetOnClose: true,
    allowMismatchedSignatures: true,
    configureBuckets: [{ name: "lake", configs: [] }],
  });
  const { port: s3Port } = await s3rver.run();
  s3rver.httpServer.unref();
  const s3 = `http://127.0.0.1:${s3Port}`;
  const client = new AwsClient({ accessKeyId: "S3RVER", secretAccessKey: "S3RVER", service: "s3", region: "us-east-1", retries: 0 });

  async function downloadPrefix(prefix: string): Promise<string> {
    const into = await mkdtemp(join(tmpdir(), "lake-read-"));
    const listed = await (await client.fetch(`${s3}/lake?list-type=2&max-keys=1000&prefix=${encodeURIComponent(prefix)}`)).text();
    const keys = [...listed.matchAll(/<Key>([^<]+)<\/Key>/g)].map((match) => match[1]!.replaceAll("&amp;", "&"));
    for (const key of keys) {
      const object = await client.fetch(`${s3}/lake/${key.split("/").map(encodeURIComponent).join("/")}`);
      if (!object.ok) throw new Error(`GET ${key}: ${object.status}`);
      const path = join(into, key);
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, new Uint8Array(await object.arrayBuffer()));
    }
    return into;
  }

  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", async () => {
      try {
        const { prefix, sql } = JSON.parse(body) as { prefix: string; sql: string };
        const root = await downloadPrefix(prefix);
        try {
          const { DuckDBInstance } = await import("@duckdb/node-api");
          const connection = await (await DuckDBInstance.create(":memory:")).connect();
          // union_by_name: each file's money has its currency's scale; without it DuckDB reads every file as the first
          // one's DECIMAL and rounds the others' amounts to that scale (docs/exports.md, "Reading the files").
          const files = `read_parquet('${join(root, prefix)}**/*.parquet', hive_partitioning = true, union_by_name = true)`;
          const reader = await connection.runAndReadAll(sql.replaceAll("{files}", files).replaceAll("{root}", join(root, prefix)));
          const rows = reader.getRowObjectsJson();
          connection.closeSync();
          res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ rows }));
        } finally {
          await rm(root, { recursive: true, force: true });
        }
      } catch (error) {
        res.writeHead(500, { "Content-Type": "application/json" }).end(JSON.stringify({ error: String(error) }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  server.unref();
  const { port } = server.address() as AddressInfo;
  process.once("exit", () => {
    void s3rver.close();
    void rm(directory, { recursive: true, force: true });
  });
  return { s3, duckdb: `http://127.0.0.1:${port}/duckdb` };
}
