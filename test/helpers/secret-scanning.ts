import { env } from "cloudflare:workers";
import { base64, p1363ToDer } from "./der.ts";
import { call } from "./http.ts";

/**
 * Signs secret-scanning reports as GitHub does, with the key pair test/helpers/secret-scanning-server.ts serves as GitHub's key
 * list: ECDSA P-256 / SHA-256 over the raw body, sent as base64 of the DER form.
 */

export const keyList = JSON.parse(env.TEST_SECRET_SCANNING) as { origin: string; identifier: string; privateJwk: JsonWebKey };

const servedKey = () => crypto.subtle.importKey("jwk", keyList.privateJwk, { name: "ECDSA", namedCurve: "P-256" }, false, ["sign"]);

export async function rawSignature(body: string, key?: CryptoKey): Promise<Uint8Array> {
  return new Uint8Array(
    await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, key ?? (await servedKey()), new TextEncoder().encode(body)),
  );
}

export interface Signed {
  identifier?: string;
  /** The signature header as sent; by default GitHub's form of a signature of the body. */
  signature?: string;
  key?: CryptoKey;
  /** A query string to add to the path. */
  query?: string;
}

/** POST /secret-scanning/github with `body` (a string is sent byte for byte), signed unless told otherwise. */
export async function report(body: unknown, { identifier = keyList.identifier, signature, key, query }: Signed = {}) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  const sig = signature ?? base64(p1363ToDer(await rawSignature(text, key)));
  return call("POST", query ? `/secret-scanning/github?${query}` : "/secret-scanning/github", {
    body: text,
    headers: { "Github-Public-Key-Identifier": identifier, "Github-Public-Key-Signature": sig },
  });
}

/** A report entry as GitHub sends it. */
export const found = (
  token: string,
  url = "https://github.com/octocat/Hello-World/blob/12345600b9cbe38a219f39a9941c9319b600c002/src/config.js",
  source = "content",
) => ({
  token,
  type: "price_data_api_key",
  url,
  source,
});

export async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}
