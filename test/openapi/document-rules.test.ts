import { Validator, type Schema as ValidatorSchema } from "@cfworker/json-schema";
import { beforeAll, describe, expect, it } from "vitest";
import type { ApiError } from "../../client/index.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call } from "../helpers/http.ts";
import { DocumentChecker, fetchDocument, type Json, METHODS, requestSchema } from "../helpers/openapi.ts";
import { adminToken } from "../helpers/tokens.ts";

/**
 * The fuzz rule (issue 53): a request the document's schema accepts is accepted by the API, or the document's schema
 * refuses it. For every rule a request schema's refinement applies, a request breaking only that rule must be refused
 * by the API (400 naming the field) and by the document: by its JSON Schema (checked with @cfworker/json-schema,
 * draft 2020-12, as OpenAPI 3.1 says), or, for a rule JSON Schema cannot state, by an `x-rules` entry naming the
 * field (docs/api-document.md). The same request with the rule kept is valid per the document, so the refusal is the
 * rule's. The rules' vocabulary is checked too: every x-rule names fields the schema has.
 */

const doc = await fetchDocument();
const checker = new DocumentChecker(doc);
const resolve = (schema: Json) => checker.resolve(schema, "").value;

interface Request {
  path: Record<string, string>;
  query: Record<string, string>;
  body?: unknown;
}

interface Case {
  rule: string;
  method: (typeof METHODS)[number];
  template: string;
  /** The request with the rule kept: the document accepts it. */
  kept: Request;
  /** The same request breaking only the rule. */
  broken: Request;
  /** The field the API's 400 names (array indices as in its detail: observations.0.price). */
  field: string;
}

const DAY = 86_400_000;
const isoIn = (ms: number) => new Date(Date.now() + ms).toISOString();
const EARLY = "2026-11-01T00:00:00Z";
const LATE = "2026-11-02T00:00:00Z";
const observation = (fields: Json) => ({
  observations: [
    {
      sku: "RULES-1",
      name: "Kettle",
      competitor: { id: "cmp_rules", name: "Rules" },
      price: "10",
      currency: "USD",
      in_stock: true,
      ...fields,
    },
  ],
});
const filtersWebhook = (filters: Json) => ({ url: "https://example.com/hooks", filters });
const bigFilters = { skus: Array.from({ length: 200 }, (_, i) => `SKU-${String(i).padStart(90, "0")}`) };
const none = { path: {}, query: {} };

const CASES: Case[] = [
  {
    rule: "the base currency among rates",
    method: "put",
    template: "/admin/fx-rates",
    kept: { ...none, body: { base: "EUR", date: "2026-11-02", rates: { USD: "1.08" } } },
    broken: { ...none, body: { base: "EUR", date: "2026-11-02", rates: { USD: "1.08", EUR: "1" } } },
    field: "rates.EUR",
  },
  {
    rule: "history: from after to",
    method: "get",
    template: "/products/{id}/history",
    kept: { path: { id: "prd_rules" }, query: { from: EARLY, to: LATE } },
    broken: { path: { id: "prd_rules" }, query: { from: LATE, to: EARLY } },
    field: "to",
  },
  {
    rule: "account usage: from after to",
    method: "get",
    template: "/account/usage",
    kept: { path: {}, query: { from: EARLY, to: LATE } },
    broken: { path: {}, query: { from: LATE, to: EARLY } },
    field: "from",
  },
  {
    rule: "a key's usage: from after to",
    method: "get",
    template: "/api-keys/{id}/usage",
    kept: { path: { id: "key_rules" }, query: { from: EARLY, to: LATE } },
    broken: { path: { id: "key_rules" }, query: { from: LATE, to: EARLY } },
    field: "from",
  },
  {
    rule: "replay: since after until",
    method: "post",
    template: "/webhooks/{id}/replay",
    kept: { path: { id: "whk_rules" }, query: {}, body: { since: EARLY, until: LATE } },
    broken: { path: { id: "whk_rules" }, query: {}, body: { since: LATE, until: EARLY } },
    field: "until",
  },
  {
    rule: "a changes export: since after until",
    method: "post",
    template: "/exports",
    kept: { ...none, body: { kind: "changes", since: EARLY, until: LATE } },
    broken: { ...none, body: { kind: "changes", since: LATE, until: EARLY } },
    field: "until",
  },
  {
    rule: "a scheduled changes export with an end",
    method: "post",
    template: "/exports",
    kept: { ...none, body: { kind: "changes", since: EARLY, schedule: "daily" } },
    broken: { ...none, body: { kind: "changes", since: EARLY, until: LATE, schedule: "daily" } },
    field: "until",
  },
  {
    rule: "quantity without unit",
    method: "post",
    template: "/admin/observations",
    kept: { ...none, body: observation({ quantity: "500", unit: "g" }) },
    broken: { ...none, body: observation({ quantity: "500" }) },
    field: "observations.0.unit",
  },
  {
    rule: "unit without quantity",
    method: "post",
    template: "/admin/observations",
    kept: { ...none, body: observation({ quantity: "500", unit: "g" }) },
    broken: { ...none, body: observation({ unit: "g" }) },
    field: "observations.0.quantity",
  },
  {
    rule: "decimals in a currency with no minor unit",
    method: "post",
    template: "/admin/observations",
    kept: { ...none, body: observation({ price: "1500", currency: "JPY" }) },
    broken: { ...none, body: observation({ price: "1500.5", currency: "JPY" }) },
    field: "observations.0.price",
  },
  {
    rule: "more decimals than the currency's minor unit (KWD 3)",
    method: "post",
    template: "/admin/observations",
    kept: { ...none, body: observation({ shipping_cost: "1.125", currency: "KWD" }) },
    broken: { ...none, body: observation({ shipping_cost: "1.1255", currency: "KWD" }) },
    field: "observations.0.shipping_cost",
  },
  {
    rule: "an amount over 2^53-1 minor units",
    method: "post",
    template: "/admin/observations",
    kept: { ...none, body: observation({ regular_price: "90071992547409.91" }) },
    broken: { ...none, body: observation({ regular_price: "90071992547409.92" }) },
    field: "observations.0.regular_price",
  },
  {
    rule: "price + shipping_cost over 2^53-1 minor units",
    method: "post",
    template: "/admin/observations",
    kept: { ...none, body: observation({ price: "90071992547409.91", shipping_cost: "0" }) },
    broken: { ...none, body: observation({ price: "90071992547409.91", shipping_cost: "0.01" }) },
    field: "observations.0.price",
  },
  {
    rule: "observed_at beyond the clock skew",
    method: "post",
    template: "/admin/observations",
    kept: { ...none, body: observation({ observed_at: isoIn(-DAY) }) },
    broken: { ...none, body: observation({ observed_at: isoIn(DAY) }) },
    field: "observations.0.observed_at",
  },
  {
    rule: "a webhook filter amount with decimals its currency has not",
    method: "post",
    template: "/webhooks",
    kept: { ...none, body: filtersWebhook({ currency: "KRW", price_below: "20000" }) },
    broken: { ...none, body: filtersWebhook({ currency: "KRW", price_below: "20000.5" }) },
    field: "filters.price_below",
  },
  {
    rule: "a webhook filter amount without currency",
    method: "patch",
    template: "/webhooks/{id}",
    kept: { path: { id: "whk_rules" }, query: {}, body: { filters: { currency: "USD", min_change_abs: "1.00" } } },
    broken: { path: { id: "whk_rules" }, query: {}, body: { filters: { min_change_abs: "1.00" } } },
    field: "filters.currency",
  },
  {
    rule: "webhook filters over 16 KiB as JSON",
    method: "post",
    template: "/webhooks",
    kept: { ...none, body: filtersWebhook({ skus: bigFilters.skus.slice(0, 20) }) },
    broken: { ...none, body: filtersWebhook(bigFilters) },
    field: "filters",
  },
  {
    rule: "a test webhook with an event type test mode does not send",
    method: "post",
    template: "/webhooks",
    kept: { ...none, body: { url: "https://example.com/hooks", environment: "test", events: ["price.changed"] } },
    broken: { ...none, body: { url: "https://example.com/hooks", environment: "test", events: ["price.changed", "api_key.leaked"] } },
    field: "events",
  },
  {
    rule: "a key's expires_at in the past",
    method: "post",
    template: "/api-keys",
    kept: { ...none, body: { name: "rules", expires_at: isoIn(30 * DAY) } },
    broken: { ...none, body: { name: "rules", expires_at: isoIn(-DAY) } },
    field: "expires_at",
  },
  {
    rule: "a key's expires_at over a year ahead",
    method: "post",
    template: "/api-keys",
    kept: { ...none, body: { name: "rules", expires_at: isoIn(300 * DAY) } },
    broken: { ...none, body: { name: "rules", expires_at: isoIn(400 * DAY) } },
    field: "expires_at",
  },
  {
    rule: "the stream: an empty flag",
    method: "get",
    template: "/events/stream",
    kept: { path: {}, query: { below_lowest_30d: "true" } },
    broken: { path: {}, query: { below_lowest_30d: "" } },
    field: "below_lowest_30d",
  },
  {
    rule: "the stream: an amount without currency",
    method: "get",
    template: "/events/stream",
    kept: { path: {}, query: { currency: "USD", price_below: "20.00" } },
    broken: { path: {}, query: { price_below: "20.00" } },
    field: "currency",
  },
  {
    rule: "the stream: decimals its currency has not",
    method: "get",
    template: "/events/stream",
    kept: { path: {}, query: { currency: "JPY", price_above: "3000" } },
    broken: { path: {}, query: { currency: "JPY", price_above: "3000.5" } },
    field: "price_above",
  },
];

/** Where an x-rule names something: the dotted path of the field from the request's part (no array indices). */
interface NamedRule {
  rule: Json;
  names: string[];
}

/** Every x-rule that applies to the operation's request: its own (for the query), and those in its body's schemas. */
function rulesOf(op: Json): NamedRule[] {
  const found: NamedRule[] = (op["x-rules"] ?? []).map((rule: Json) => ({ rule, names: [rule.field, rule.other].filter(Boolean) }));
  const visit = (schema: Json | undefined, at: string[], depth: number) => {
    if (!schema || depth > 12) return;
    const node = resolve(schema);
    for (const rule of node["x-rules"] ?? []) {
      const fields: string[] = [rule.field, rule.other].filter((f) => typeof f === "string");
      found.push({ rule, names: fields.length ? fields.map((f) => [...at, f].join(".")) : [at.join(".")] });
    }
    for (const [name, child] of Object.entries<Json>(node.properties ?? {})) visit(child, [...at, name], depth + 1);
    for (const alternative of [...(node.anyOf ?? []), ...(node.oneOf ?? []), ...(node.allOf ?? [])]) visit(alternative, at, depth + 1);
    if (node.items) visit(node.items, at, depth + 1);
  };
  visit(op.requestBody?.content?.["application/json"]?.schema, [], 0);
  return found;
}

const withoutIndices = (field: string) => field.replace(/\.\d+(?=\.|$)/g, "");

let apiKey: string;
let login: string;
beforeAll(async () => {
  ({ key: apiKey, token: login } = await freshAccount({ plan: "premium", sub: `document-rules-${Date.now()}` }));
});

async function send(c: Case, request: Request): Promise<Response> {
  const op = doc.paths[c.template][c.method];
  const scheme = Object.keys(op.security[0])[0];
  const token = scheme === "ApiKey" ? apiKey : scheme === "AdminJWT" ? await adminToken("document-rules") : login;
  const path = c.template.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(request.path[name]!));
  const query = new URLSearchParams(request.query).toString();
  return call(c.method.toUpperCase(), query ? `${path}?${query}` : path, { token, body: request.body });
}

describe("the fuzz rule: what the API refuses, the document refuses or names", () => {
  it.each(CASES.map((c) => [c.rule, c] as const))("%s", async (_, c) => {
    const op = checker.operation(c.method, c.template);
    const validator = new Validator({ ...doc, ...requestSchema(op, resolve) } as ValidatorSchema, "2020-12", false);
    expect(validator.validate(c.kept).errors, "the request with the rule kept is valid per the document").toEqual([]);

    const res = await send(c, c.broken);
    const text = await res.clone().text();
    expect(res.status, text).toBe(400);
    expect(((await res.json()) as ApiError).detail, text).toContain(`${c.field}:`);

    const refusedBySchema = !validator.validate(c.broken).valid;
    const named = rulesOf(op).some(({ names }) => names.includes(withoutIndices(c.field)));
    expect(refusedBySchema || named, `${c.method.toUpperCase()} ${c.template}: neither its schema nor an x-rule states "${c.rule}"`).toBe(
      true,
    );
  });
});

describe("the x-rules extension", () => {
  const RULE_FIELDS: Record<string, string[]> = {
    after: ["field", "other"],
    before: ["field", "other"],
    future: ["field", "max_ahead_seconds"],
    "not-future": ["field", "tolerance_seconds"],
    requires: ["field", "other"],
    money: ["field", "currency", "max_minor_units"],
    "money-total": ["field", "other", "currency", "max_minor_units"],
    "max-json-bytes": ["max_bytes"],
  };

  /** Every schema object and operation carrying x-rules, with the fields its rules may name. */
  function* carriers(): Generator<{ where: string; rules: Json[]; fields: Set<string> }> {
    for (const [template, item] of Object.entries<Json>(doc.paths)) {
      for (const method of METHODS) {
        const op = item[method];
        if (op?.["x-rules"]) {
          const query = (op.parameters ?? []).map((p: Json) => resolve(p)).filter((p: Json) => p.in === "query");
          yield { where: `${method} ${template}`, rules: op["x-rules"], fields: new Set(query.map((p: Json) => p.name)) };
        }
      }
    }
    const seen = new Set<Json>();
    const walk = function* (value: unknown, where: string): Generator<{ where: string; rules: Json[]; fields: Set<string> }> {
      if (value === null || typeof value !== "object" || seen.has(value as Json)) return;
      seen.add(value as Json);
      const node = value as Json;
      // An operation's own rules name its query parameters: yielded above.
      if (Array.isArray(node["x-rules"]) && !("responses" in node))
        yield { where, rules: node["x-rules"], fields: new Set(Object.keys(node.properties ?? {})) };
      for (const [key, child] of Object.entries(node)) if (key !== "x-rules") yield* walk(child, `${where}/${key}`);
    };
    yield* walk(doc.components, "#/components");
    yield* walk(doc.paths, "#/paths");
  }

  it("is a list of known rules, each naming fields the schema or the operation's query has", () => {
    const all = [...carriers()];
    expect(all.length).toBeGreaterThan(5);
    for (const { where, rules, fields } of all) {
      for (const rule of rules) {
        expect(Object.keys(RULE_FIELDS), `${where}: ${JSON.stringify(rule)}`).toContain(rule.rule);
        expect(Object.keys(rule).sort(), `${where}: ${JSON.stringify(rule)}`).toEqual(["rule", ...RULE_FIELDS[rule.rule]!].sort());
        for (const key of ["field", "other", "currency"])
          if (key in rule) expect(fields, `${where}: ${rule.rule}.${key}`).toContain(rule[key]);
      }
    }
  });

  it("is defined in the document's description, so a reader of the document alone finds it", () => {
    expect(doc.info.description).toContain("x-rules");
    for (const rule of Object.keys(RULE_FIELDS)) expect(doc.info.description, rule).toContain(`\`${rule}\``);
  });
});
