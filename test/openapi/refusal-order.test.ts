import { env } from "cloudflare:workers";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { generateApiKey, hashApiKey } from "../../src/api-keys/format.ts";
import { KEY_SCOPES, type KeyScope } from "../../src/api-keys/scopes.ts";
import type { Environment } from "../../src/platform/tables.ts";
import { bucketName, FIXED_BUCKETS } from "../../src/rate-limit/buckets.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { arbitrary, type Schema } from "../helpers/json-schema-arbitrary.ts";
import { DocumentChecker, fetchDocument, type Json, METHODS, parametersSchema } from "../helpers/openapi.ts";
import { accountToken, adminToken } from "../helpers/tokens.ts";

/**
 * The order of refusals (contract, fifth wave), over every operation of GET /openapi.json: 401 (who are you) before 403
 * (may you: environment, scope, address, a key on a login route) before 429 (the credential's own limits) before 400
 * (is the request right). Each request combines a credential (none, forged, of the wrong kind, or a real one), a
 * restriction it fails (the route's scope, environment or the key's address), a spent credential, and a bad query or
 * body; it must get the refusal of the earliest check it fails. Nothing is ever admitted whole, so nothing is written.
 */

const doc = await fetchDocument();
const checker = new DocumentChecker(doc);
const resolve = (schema: Schema) => checker.resolve(schema, "").value;

type Scheme = "ApiKey" | "AccountLogin" | "AdminJWT" | "GitHubSignature";
interface Operation {
  method: string;
  template: string;
  scheme: Scheme;
  /** The key scope or admin scope the operation needs. */
  scope: string | undefined;
  /** The environment whose keys it takes, as the document says it (operation(): "Takes test keys only"). */
  environment: Environment | undefined;
  /** The path parameters and the body, as one JSON Schema. */
  schema: Schema;
}

const operations: Operation[] = Object.entries<Json>(doc.paths).flatMap(([template, item]) =>
  METHODS.filter((method) => item[method]).map((method) => {
    const op = item[method];
    const [[scheme, scopes]] = Object.entries<string[]>(op.security[0]) as [[Scheme, string[]]];
    const params: Json[] = (op.parameters ?? []).map((p: Json) => resolve(p));
    const body = op.requestBody?.content?.["application/json"]?.schema;
    const schema: Schema = {
      type: "object",
      properties: { path: parametersSchema(params.filter((p) => p.in === "path")), ...(body ? { body } : {}) },
      required: ["path", ...(body ? ["body"] : [])],
      additionalProperties: false,
    };
    const environment = /Takes (live|test) keys only/.exec(op.description ?? "")?.[1] as Environment | undefined;
    return { method, template, scheme, scope: scopes[0], environment, schema };
  }),
);

/** What a request fails, each check at most once: a request failing none is not sent. */
interface Case {
  credential: "valid" | "none" | "forged" | "wrong-kind";
  /** A valid credential's restriction it fails. */
  restriction: "none" | "scope" | "environment" | "address";
  /** Its credential's own bucket is spent (the key's limits; a login's account or admin subject). */
  spent: boolean;
  badInput: "none" | "unknown-query-parameter" | "not-json" | "not-an-object";
}

/** The refusal the contract's order gives: the earliest check the request fails. */
function expected(operation: Operation, c: Case): { status: number; detail: RegExp } | undefined {
  const login = operation.scheme !== "ApiKey";
  if (operation.scheme === "GitHubSignature") return { status: 401, detail: /signature/i };
  if (c.credential === "none" || c.credential === "forged") return { status: 401, detail: /./ };
  if (c.credential === "wrong-kind")
    return login ? { status: 403, detail: /API keys cannot/ } : { status: 401, detail: /needs an API key/ };
  if (c.restriction === "environment") return { status: 403, detail: new RegExp(`takes ${operation.environment} keys only`) };
  if (c.restriction === "scope") return { status: 403, detail: new RegExp(operation.scope!) };
  if (c.restriction === "address") return { status: 403, detail: /may not be used from/ };
  if (c.spent) return { status: 429, detail: /Rate limit exceeded/ };
  if (c.badInput !== "none") return { status: 400, detail: c.badInput === "unknown-query-parameter" ? /refusal_probe/ : /./ };
  return undefined;
}

/** The cases an operation can be sent: a restriction only where the route has one. */
function cases(operation: Operation): fc.Arbitrary<Case> {
  const restrictions: Case["restriction"][] = ["none"];
  if (operation.scheme === "ApiKey") restrictions.push("scope", "address");
  if (operation.scheme === "AdminJWT") restrictions.push("scope");
  if (operation.environment) restrictions.push("environment");
  const hasBody = "body" in operation.schema.properties;
  return fc.record({
    credential: fc.constantFrom<Case["credential"][]>("valid", "valid", "none", "forged", "wrong-kind"),
    restriction: fc.constantFrom(...restrictions),
    spent: fc.boolean(),
    badInput: fc.constantFrom<Case["badInput"][]>(
      "none",
      "unknown-query-parameter",
      ...(hasBody ? (["not-json", "not-an-object"] as const) : []),
    ),
  });
}

/** API keys by what they are: environment, the scope they lack or the address they are kept to, and whether spent. */
const keys = new Map<string, string>();
const keyName = (environment: Environment, restriction: "none" | KeyScope | "address", spent: boolean) =>
  `${environment} ${restriction} ${spent}`;
const ALLOWED_ONLY = "192.0.2.1"; // the tests' clients call from 2001:db8::/32 (randomTestIp)

/** Logins whose bucket is spent (their account's, their admin subject's). */
const SPENT_ACCOUNT = `refusal-order-spent-${Date.now()}`;
const SPENT_ADMIN = `refusal-order-spent-admin-${Date.now()}`;
let subjects = 0;

async function credentialFor(operation: Operation, c: Case): Promise<string | undefined> {
  if (c.credential === "none" || operation.scheme === "GitHubSignature") return undefined;
  const login = operation.scheme !== "ApiKey";
  if (c.credential === "forged") {
    if (login) return `${(await accountToken(`forged-${++subjects}`)).slice(0, -4)}AAAA`; // its signature broken
    return generateApiKey(env.KEY_PREFIX, operation.environment ?? "live").key; // well formed, nobody's
  }
  // A key: on a data route the valid credential, on a login route the wrong kind; and the other way round for a login.
  return login === (c.credential === "wrong-kind") ? keyFor(operation, c) : loginFor(operation, c);
}

function keyFor(operation: Operation, c: Case): string {
  const restricted = c.credential === "valid" ? c.restriction : "none";
  const environment = operation.environment ?? "live";
  if (restricted === "environment") return keys.get(keyName(environment === "test" ? "live" : "test", "none", c.spent))!;
  const restriction = restricted === "scope" ? (operation.scope as KeyScope) : restricted;
  return keys.get(keyName(environment, restriction, c.spent))!;
}

function loginFor(operation: Operation, c: Case): Promise<string> {
  const admin = operation.scheme === "AdminJWT";
  const sub = c.spent ? (admin ? SPENT_ADMIN : SPENT_ACCOUNT) : `refusal-order-${Date.now()}-${++subjects}`;
  if (!admin) return accountToken(sub);
  return adminToken(sub, c.restriction === "scope" ? "nothing:granted" : operation.scope);
}

async function send(operation: Operation, c: Case, request: { path: Record<string, string>; body?: unknown }) {
  const path = operation.template.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(request.path[name]!));
  const query = c.badInput === "unknown-query-parameter" ? "?refusal_probe=1" : "";
  const body = { "not-json": "{not json", "not-an-object": "[]", none: request.body, "unknown-query-parameter": request.body }[c.badInput];
  return call(operation.method.toUpperCase(), `${path}${query}`, { token: await credentialFor(operation, c), body });
}

beforeAll(async () => {
  // Time stands still for this file: a bucket spent here stays spent while the properties run.
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(Date.now());
  for (const environment of ["live", "test"] as const) {
    const { token } = await freshAccount({ sub: `refusal-order-${environment}-${Date.now()}` });
    for (const restriction of ["none", ...KEY_SCOPES, "address"] as const) {
      for (const spent of [false, true]) {
        const scopes = KEY_SCOPES.filter((scope) => scope !== restriction);
        const created = await expectJson(
          await call("POST", "/api-keys", {
            token,
            body: { name: "refusal order", environment, scopes, allowed_ips: restriction === "address" ? [ALLOWED_ONLY] : null },
          }),
          201,
        );
        keys.set(keyName(environment, restriction, spent), created.key);
        if (!spent) continue;
        // Spent for the day: its object reads the key (one admission), then holds it to one request a day.
        const hash = await hashApiKey(created.key);
        const stub = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(hash));
        await stub.admitKey(hash, { ip: ALLOWED_ONLY, scope: undefined });
        await stub.setLimits({ per_minute: 1, per_hour: 1, per_day: 1 });
      }
    }
  }
  for (const [kind, sub] of [
    ["account", SPENT_ACCOUNT],
    ["admin", SPENT_ADMIN],
  ] as const) {
    const bucket = env.RATE_LIMIT_BUCKETS.get(env.RATE_LIMIT_BUCKETS.idFromName(bucketName(kind, sub)));
    for (let i = 0; i < FIXED_BUCKETS[kind].per_minute; i++) await bucket.admit(FIXED_BUCKETS[kind]);
  }
}, 120_000); // 600 calls to the admin subject's object: seconds on a loaded machine

afterAll(() => vi.useRealTimers());

describe.each(operations.map((operation) => [`${operation.method.toUpperCase()} ${operation.template}`, operation] as const))(
  "%s",
  (_, operation) => {
    const requests = arbitrary(operation.schema, resolve) as fc.Arbitrary<{ path: Record<string, string>; body?: unknown }>;

    it("answers the earliest check a request fails: 401, then 403, then 429, then 400", async () => {
      await fc.assert(
        fc.asyncProperty(cases(operation), requests, async (c, request) => {
          const refusal = expected(operation, c);
          fc.pre(refusal !== undefined);
          const res = await send(operation, c, request);
          const text = res.status >= 400 ? await res.clone().text() : "";
          await res.body?.cancel();
          const label = `${JSON.stringify(c)} → ${res.status} ${text}`;
          expect(res.status, label).toBe(refusal!.status);
          expect(JSON.parse(text).detail, label).toMatch(refusal!.detail);
        }),
        { numRuns: 16, maxSkipsPerRun: 20 },
      );
    }, 30_000);
  },
);

describe("issue 47's case", () => {
  it("a live key's POST /test/observations with a bad body is 403 naming the environment, not 400", async () => {
    for (const body of ["{not json", { observations: "none" }]) {
      const res = await call("POST", "/test/observations", { token: keys.get(keyName("live", "none", false)), body });
      expect((await expectJson(res, 403)).detail).toMatch(/live key, and this route takes test keys only/);
    }
  });

  it("a body over 1 MiB is 413 only for a request that passed 401, 403 and 429", async () => {
    const body = `{"observations":[],"pad":"${"x".repeat(1024 * 1024)}"}`;
    const live = keys.get(keyName("live", "none", false));
    expect((await call("POST", "/test/observations", { token: live, body })).status).toBe(403);
    expect((await call("POST", "/test/observations", { token: keys.get(keyName("test", "none", true)), body })).status).toBe(429);
    expect((await call("POST", "/api-keys", { token: live, body })).status).toBe(403);
    expect((await call("POST", "/test/observations", { token: keys.get(keyName("test", "none", false)), body })).status).toBe(413);
  });
});
