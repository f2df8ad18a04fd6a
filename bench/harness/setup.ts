import { writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { exportJWK, generateKeyPair } from "jose";
import { ROOT, run, wrangler } from "./processes.ts";

/** What every part of the bench sets up: an identity provider and a seeded local D1. */

/** A local JWKS for the real worker's logins (accounts, admin): a fresh key pair per run. */
export async function startJwks() {
  const { publicKey, privateKey } = await generateKeyPair("RS256", { extractable: true });
  const kid = "bench-key";
  const body = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" }] });
  const server = createServer((req, res) => {
    if (req.url === "/jwks") res.writeHead(200, { "Content-Type": "application/json" }).end(body);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (!address || typeof address !== "object") throw new Error("The JWKS server has no address.");
  const issuer = `http://127.0.0.1:${address.port}`;
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: "RS256" };
  return { server, issuer, jwksUrl: `${issuer}/jwks`, privateJwk };
}

/**
 * Migrations and the catalogue (scripts/seed.ts, which applies them in parts), then the bench's keys,
 * into the local D1 state `dir`; the SQL files go beside it.
 */
export async function seedState(dir: string, products: number, keysSql: string, timeoutMs = 60_000) {
  await run(
    process.execPath,
    [join(ROOT, "scripts/seed.ts"), "--products", String(products), "--out", `${dir}-catalogue.sql`, "--persist-to", dir],
    { timeoutMs },
  );
  writeFileSync(`${dir}-keys.sql`, keysSql);
  await wrangler(["d1", "execute", "DB", "--local", "--yes", "--persist-to", dir, "--file", `${dir}-keys.sql`]);
}

export type Jwks = Awaited<ReturnType<typeof startJwks>>;
