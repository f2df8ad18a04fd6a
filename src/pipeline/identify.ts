import { hashApiKey, isWellFormedApiKey, keyEnvironment, keyInside, keyShape, looksLikeApiKey } from "../api-keys/format.ts";
import type { ApiKeyOfRequest } from "../api-keys/object/types.ts";
import { type Identity, unauthorized, verifyIdpToken } from "../auth/idp.ts";
import { isConnectorToken } from "../connect/server.ts";
import { ApiError } from "../http/errors.ts";
import { remember } from "../platform/bounded-map.ts";
import type { Config } from "../platform/config.ts";
import { isolateMap } from "../platform/isolate-memory.ts";
import type { Environment } from "../platform/tables.ts";

/**
 * What the request's `Authorization` header turned out to be. Worked out once, before admission,
 * because the credential picks the rate-limit bucket; routes then say which kind they need
 * (src/operation/guards.ts). No Hono here: this is plain input in, credential out.
 */
export type Credential =
  | { kind: "none" }
  | {
      kind: "api-key";
      keyHash: string;
      environment: Environment;
      key?: ApiKeyOfRequest;
    }
  | { kind: "login"; identity: Identity }
  | { kind: "rejected"; error: ApiError; wasApiKey: boolean };

/** An OAuth access token of one-click connect (src/connect/): admission turns it into its connector key, or refuses it. */
export type Identified = Credential | { kind: "connector-token"; token: string };

function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  if (!match) throw unauthorized('The Authorization header must be "Bearer <token>".', true);
  return match[1];
}

/**
 * The hashes of API keys this isolate has checked: a key's checksum and SHA-256 are worked out on its first
 * request here, not on every request (the hot path's one per-request hash). Only well-formed keys are kept,
 * bounded like admission's memories; a key's hash never changes, so an entry is never stale.
 */
const keyHashes = isolateMap<string, string>();

async function keyHashOf(token: string, prefix: string): Promise<string> {
  const known = keyHashes.get(token);
  if (known !== undefined) return known;
  if (!isWellFormedApiKey(token, prefix))
    throw unauthorized(`The API key is malformed: a key is ${keyShape(prefix)}; check that it was copied whole.`, true);
  const keyHash = await hashApiKey(token);
  remember(keyHashes, token, keyHash);
  return keyHash;
}

/** Three base64url segments: what a signed JWT (an account login, an admin token) looks like before it is verified. */
const looksLikeJwt = (token: string) => /^[\w-]+\.[\w-]+\.[\w-]*$/.test(token);

/**
 * A bearer that is neither a key nor a JWT, worded for the credential the route takes (`takes`, its declaration's):
 * a route that takes a login or an admin token hears about its JWT (verifyIdpToken words it); any other, about the
 * API key it takes, with what a key looks like.
 */
function notACredential(token: string, prefix: string, takes: string | undefined): ApiError | undefined {
  if (takes === "account" || takes === "admin" || looksLikeJwt(token)) return undefined;
  return unauthorized(
    `The bearer token is not an API key: a key is ${keyShape(prefix)}, with nothing around it; copy it whole from where it was created.`,
    true,
  );
}

/**
 * Checks what can be checked without any object: a key's format and checksum, a JWT's signature and claims. `takes` is
 * the credential the route declares (src/operation/operation.ts), which words a bearer that is none.
 */
export async function identify(header: string | undefined, config: Config, takes?: string): Promise<Identified> {
  let wasApiKey = false;
  try {
    const token = bearerToken(header);
    if (token === undefined) return { kind: "none" };
    const pasted = keyInside(token, config.KEY_PREFIX);
    wasApiKey = pasted !== undefined || looksLikeApiKey(token, config.KEY_PREFIX);
    if (pasted !== undefined) {
      const [before, after] = token.split(pasted);
      throw unauthorized(
        `The API key came as ${before}…${after}, with something around it; send the key alone (no quotes or commas).`,
        true,
      );
    }
    if (wasApiKey) {
      const keyHash = await keyHashOf(token, config.KEY_PREFIX);
      return { kind: "api-key", keyHash, environment: keyEnvironment(token, config.KEY_PREFIX)! }; // well formed: it has one
    }
    if (isConnectorToken(token)) return { kind: "connector-token", token };
    const refused = notACredential(token, config.KEY_PREFIX, takes);
    if (refused) throw refused;
    return { kind: "login", identity: await verifyIdpToken(token, config) };
  } catch (error) {
    if (error instanceof ApiError) return { kind: "rejected", error, wasApiKey };
    throw error;
  }
}
