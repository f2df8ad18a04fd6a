import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair } from "jose";

/**
 * A stand-in identity provider for the tests: a fresh RS256 key pair whose public half is served
 * as a JWKS over real HTTP, so the worker fetches and caches it exactly as it would an IdP's.
 * The private half reaches the tests as a binding, and test/helpers/tokens.ts signs with it.
 * `/switchable/<name>/jwks.json` serves the same set but can be taken down: POST `…/down` makes it
 * answer 503 until POST `…/up`; GET `…/fetches` counts the key-set fetches it had (test/auth/jwks-outage.test.ts).
 * A name per test, so test files running at once never see each other's outage. `/two-keys/jwks.json` serves a set of
 * two RS256 keys, another one's first and then the test IdP's, as an IdP mid-rotation does (test/auth/jwt-without-kid.test.ts).
 */
export async function serveTestJwks() {
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
