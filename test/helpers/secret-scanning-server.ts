import { generateKeyPairSync } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A stand-in for GitHub's secret-scanning key list: an ECDSA P-256 key pair whose public half is served over
 * real HTTP as GitHub serves its list, so the worker fetches and caches it as it would GitHub's. The
 * private half reaches the tests as a binding (test/helpers/secret-scanning.ts signs with it). The tests
 * can add keys to the list (POST, a PEM) and read how often it was fetched, to test rotation and refetching.
 */
export async function serveSecretScanningKeys() {
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
