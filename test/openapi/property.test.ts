import { env } from "cloudflare:workers";
import { Validator, type Schema as ValidatorSchema } from "@cfworker/json-schema";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { ApiError } from "../../client/index.ts";
import { latestRatesView, todaysRates } from "../../src/fx-rates/service.ts";
import { database } from "../../src/platform/db.ts";
import { MoneyError, parseMoney } from "../../src/platform/money.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call } from "../helpers/http.ts";
import { arbitrary, type Mutation, mutations, type Schema } from "../helpers/json-schema-arbitrary.ts";
import { DocumentChecker, fetchDocument, type Json, METHODS, requestSchema } from "../helpers/openapi.ts";
import { report } from "../helpers/secret-scanning.ts";
import { accountToken, adminToken } from "../helpers/tokens.ts";
import { installReceiver } from "../helpers/webhook-receiver.ts";

/**
 * The document says what the validators say. For every operation in GET /openapi.json, requests are
 * generated from the document's own JSON Schemas (path, query, body) and sent through the worker
 * with real credentials: a request the document calls valid is never refused with 400, and one
 * change that makes it invalid per the document (wrong type, out of range, broken pattern, unknown
 * or missing field) is refused with 400 whose detail names the field. Validity is decided by
 * @cfworker/json-schema against the document, not by the code under test.
 */

const RUNS = 12;
/** Each run sends one request per kind of change, so fewer runs. */
const INVALID_RUNS = 6;

const doc = await fetchDocument();
const checker = new DocumentChecker(doc);
const resolve = (schema: Schema) => checker.resolve(schema, "").value;

interface Request {
  path: Record<string, string>;
  query: Record<string, string>;
  body?: unknown;
}

interface Operation {
  method: string;
  template: string;
  credential: "ApiKey" | "AccountLogin" | "AdminJWT" | "GitHubSignature";
  /** The request as one JSON Schema: { path, query, body }. */
  schema: Schema;
  validator: Validator;
}

// A server-sent event stream never ends, so its body cannot be read here; test/stream/ checks its query.
const streams = (op: Json) => op.responses?.["200"]?.content?.["text/event-stream"] !== undefined;

const operations: Operation[] = Object.entries<Json>(doc.paths).flatMap(([template, item]) =>
  METHODS.filter((method) => item[method] && !streams(item[method])).map((method) => {
    const op = item[method];
    const schema: Schema = requestSchema(op, resolve);
    // The document as the root, so the body's "#/components/…" references resolve.
    const validator = new Validator({ ...doc, ...schema } as ValidatorSchema, "2020-12", false);
    return { method, template, credential: Object.keys(op.security[0])[0] as Operation["credential"], schema, validator };
  }),
);

let apiKey: string;
/**
 * Test keys (pda_test_), of an account of their own: POST /test/observations takes no other. A test key runs at the
 * standard plan's 60 a minute, so the calls take turns over several.
 */
const testKeys: string[] = [];
let counter = 0;

/** Real credentials for the operation: a fresh account or admin subject per call, so no bucket runs dry. */
async function credential(operation: Operation): Promise<string> {
  if (operation.template === "/test/observations") return testKeys[++counter % testKeys.length]!;
  if (operation.credential === "ApiKey") return apiKey;
  if (operation.credential === "AccountLogin") return accountToken(`property-${Date.now()}-${++counter}`);
  return adminToken(`property-admin-${++counter}`);
}

async function send(operation: Operation, request: Request): Promise<Response> {
  const path = operation.template.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(request.path[name]!));
  // An array is the parameter repeated (`?type=a&type=b`); an empty one is the parameter left out.
  const query = new URLSearchParams(
    Object.entries(request.query).flatMap(([k, v]) => [v].flat().map((item) => [k, String(item)])),
  ).toString();
  if (operation.credential === "GitHubSignature") return report(request.body, { query });
  return call(operation.method.toUpperCase(), query ? `${path}?${query}` : path, {
    token: await credential(operation),
    body: request.body,
  });
}

/**
 * The document's own `x-rules` (docs/api-document.md) a request breaks, read as a fuzzer would: the operation's, over
 * its query, and those of its body's object (for a union, the alternative its discriminator names). The 400 detail a
 * request breaking one must get, or undefined. Amounts, totals and bytes are checked below (they sit deeper).
 */
function xRuleBroken(operation: Operation, request: Request): string | undefined {
  const op = doc.paths[operation.template][operation.method];
  const body = op.requestBody?.content?.["application/json"]?.schema;
  const bodyValues = (request.body ?? {}) as Record<string, unknown>;
  // A discriminator's mapping names the alternative by its $ref.
  const mapped = body?.discriminator?.mapping[bodyValues[body.discriminator.propertyName] as string];
  const chosen = body?.discriminator ? (mapped === undefined ? undefined : { $ref: mapped }) : body;
  const sources: [Json[], Record<string, unknown>][] = [
    [op["x-rules"] ?? [], request.query],
    [chosen ? (resolve(chosen)["x-rules"] ?? []) : [], bodyValues],
  ];
  for (const [rules, values] of sources) {
    for (const rule of rules) {
      const [value, other] = [values[rule.field], values[rule.other]].map((v) => (typeof v === "string" ? Date.parse(v) : undefined));
      if (value === undefined) continue;
      if (rule.rule === "after" && other !== undefined && value <= other) return `${rule.field}: must be later than ${rule.other}`;
      if (rule.rule === "before" && other !== undefined && value >= other) return `${rule.field}: must be before ${rule.other}`;
      if (rule.rule === "future" && (value <= Date.now() || value > Date.now() + rule.max_ahead_seconds * 1000))
        return `${rule.field}: must be`;
    }
  }
  return undefined;
}

/**
 * The currencies with a rate today, as GET /fx-rates lists them (`?currency=` of any other is refused): read as the
 * worker reads them (this isolate's copy of the published rates), again before each request, as PUT /admin/fx-rates
 * runs here too.
 */
let convertible: ReadonlySet<string> = new Set();
const readConvertible = async () => {
  convertible = new Set(latestRatesView(await todaysRates(database(env.DB), env.CATALOGUE)).currencies);
};
/**
 * The rules JSON Schema cannot say (they relate two fields, a field and the clock, or stored data): the x-rules above,
 * then those inside a body's lists and the ones stated in words. The 400 detail a request breaking one must get, or
 * undefined.
 */
function describedRuleBroken(operation: Operation, request: Request): string | undefined {
  const ruled = xRuleBroken(operation, request);
  if (ruled) return ruled;
  const filters =
    (operation.template === "/webhooks" || operation.template === "/webhooks/{id}") &&
    (request.body as { filters?: Record<string, any> } | undefined)?.filters;
  if (filters) {
    const amounts = ["min_change_abs", "price_below", "price_above"].filter((field) => typeof filters[field] === "string");
    for (const field of amounts) {
      try {
        parseMoney(filters[field], filters.currency);
      } catch (error) {
        if (error instanceof MoneyError) return `filters.${field}: ${error.message}`;
        throw error;
      }
    }
  }
  if (operation.template === "/admin/observations" || operation.template === "/test/observations") {
    const observations = (request.body as { observations: Record<string, any>[] }).observations;
    for (const [i, observation] of observations.entries()) {
      for (const field of ["price", "regular_price", "shipping_cost"]) {
        if (typeof observation[field] !== "string") continue;
        try {
          parseMoney(observation[field], observation.currency);
        } catch (error) {
          if (error instanceof MoneyError) return `observations.${i}.${field}: ${error.message}`;
          throw error;
        }
      }
    }
    // A failed check must name an offer already known: a generated SKU names none. (A test key's generated SKU is
    // refused before that, as no sandbox SKU: refusedOnceRead.)
    const failed = observations.findIndex(
      (observation) => observation.check_status === "not_found" || observation.check_status === "blocked",
    );
    if (failed >= 0 && operation.template === "/admin/observations") return ".check_status: ";
  }

  // A currency the document lists but that has no rate today (GET /fx-rates lists those that have one) is refused.
  const { currency } = request.query;
  if ((operation.template === "/products" || operation.template === "/products/{id}") && typeof currency === "string")
    if (!convertible.has(currency)) return `currency: ${currency} has no exchange rate`;
  if (operation.template === "/admin/fx-rates") {
    const { base, rates } = request.body as { base: string; rates: Record<string, string> };
    if (rates[base] !== undefined) return `rates.${base}: must be left out: the base's rate is 1`;
  }
  return undefined;
}

/**
 * A rule stated in words that a valid body still meets once it is read: a test key's sandbox has its own SKUs only
 * (TEST-…), and what the generator makes is never one of them. A body the document refuses is refused before it.
 */
const refusedOnceRead = (operation: Operation) => (operation.template === "/test/observations" ? "not a sandbox product" : undefined);

/** One-change variants of a valid request that the document refuses (path values only where they still reach the route). */
function invalidVariants(operation: Operation, request: Request): Mutation[] {
  const part = (name: "path" | "query" | "body", strings: boolean) =>
    mutations(operation.schema.properties[name], request[name], resolve, { strings }).map((m) => ({
      ...m,
      value: { ...request, [name]: m.value },
    }));
  const variants = [
    ...part("path", true).filter((m) => m.path.length === 1 && m.what === "too long"),
    ...part("query", true),
    ...("body" in request ? part("body", false).filter((m) => m.path.length > 0 || m.what === "unknown field") : []),
  ];
  return variants.filter((m) => !operation.validator.validate(m.value).valid);
}

const detailOf = async (res: Response) => ((await res.clone().json()) as ApiError).detail;

beforeAll(async () => {
  installReceiver(); // any webhook delivery the generated requests cause is answered here, never sent out
  ({ key: apiKey } = await freshAccount({ plan: "premium", sub: `property-${Date.now()}` }));
  const sandbox = await freshAccount({ sub: `property-sandbox-${Date.now()}` });
  for (let i = 0; i < 4; i++) {
    const created = await call("POST", "/api-keys", { token: sandbox.token, body: { name: "property", environment: "test" } });
    testKeys.push(((await created.json()) as { key: string }).key);
  }
  await report([]); // GitHub's key list fetched once here, not inside a property's time budget
});

afterAll(() => vi.restoreAllMocks());

describe.each(operations.map((operation) => [`${operation.method.toUpperCase()} ${operation.template}`, operation] as const))(
  "%s",
  (_, operation) => {
    // The generator ignores if/then/else and not (a currency's decimals, the fx base, a test webhook's types): what
    // they refuse is left out here, and test/openapi/document-rules.test.ts holds each of those rules.
    const requests = (arbitrary(operation.schema, resolve) as fc.Arbitrary<Request>).filter(
      (request) => operation.validator.validate(request).valid,
    );

    it("accepts what the document calls valid (no 400 but for a rule it states in words)", async () => {
      await fc.assert(
        fc.asyncProperty(requests, async (request) => {
          expect(operation.validator.validate(request).errors).toEqual([]); // the generator keeps to the document
          await readConvertible();
          const res = await send(operation, request);
          const label = `${JSON.stringify(request).slice(0, 300)} → ${res.status} ${await res.clone().text()}`;
          expect(res.status, label).toBeLessThan(500);
          const described = describedRuleBroken(operation, request) ?? refusedOnceRead(operation);
          if (described) {
            expect(res.status, label).toBe(400);
            expect(await detailOf(res), label).toContain(described);
          } else {
            expect(res.status, label).not.toBe(400);
          }
        }),
        { numRuns: RUNS },
      );
    });

    it("refuses with 400 naming the field what one change makes invalid per the document (each kind of change, every run)", async () => {
      await fc.assert(
        fc.asyncProperty(requests, fc.nat(), async (request, pick) => {
          await readConvertible();
          fc.pre(describedRuleBroken(operation, request) === undefined);
          const variants = invalidVariants(operation, request);
          fc.pre(variants.length > 0);
          // One variant of each kind (wrong type, too long, unknown field, …), so no kind is left to chance.
          const kinds = new Map<string, Mutation[]>();
          for (const variant of variants) kinds.set(variant.what, [...(kinds.get(variant.what) ?? []), variant]);
          for (const ofKind of kinds.values()) {
            const variant = ofKind[pick % ofKind.length]!;
            const res = await send(operation, variant.value as Request);
            const label = `${variant.what} at ${variant.named}: ${JSON.stringify(variant.value).slice(0, 300)} → ${res.status} ${await res.clone().text()}`;
            expect(res.status, label).toBe(400);
            expect(await detailOf(res), label).toContain(variant.named);
          }
        }),
        { numRuns: INVALID_RUNS, maxSkipsPerRun: 50 },
      );
      // A body with many optional fields (a webhook's filters) has many variants to check: on a loaded machine that takes seconds.
    }, 20_000);
  },
);
