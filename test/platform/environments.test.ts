import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { EVENT_METHODS } from "../../src/mcp/events/methods.ts";
import { sandboxBase } from "../../src/sandbox/catalogue.ts";
import { generateWebhookSecret } from "../../src/webhooks/secrets.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { publishSnapshot } from "../helpers/catalogue-factory.ts";
import { connect } from "../helpers/connect.ts";
import { storeTodaysRates } from "../helpers/fx-rates.ts";
import { call, expectJson } from "../helpers/http.ts";
import { postMcp, toolCall } from "../helpers/mcp.ts";
import { bodyText, fetchDocument, type Json, METHODS } from "../helpers/openapi.ts";
import { sandboxOf } from "../helpers/sandbox.ts";
import { openStream, readFrames } from "../helpers/stream-frames.ts";
import { accountToken } from "../helpers/tokens.ts";
import { HOOKS_ORIGIN, installReceiver } from "../helpers/webhook-receiver.ts";
import { ingest } from "../helpers/webhooks.ts";

/**
 * Environments apart (contract, fifth wave, "Test mode's own house"): two accounts, A and B, each with a live key and a
 * test key. The live catalogue changes (POST /admin/observations) and each account changes its own sandbox (POST
 * /test/observations, one product both change and one each alone). Then every API-key operation of the OpenAPI
 * document, every MCP tool and events method and the stream (its live phase, and backfills from a cursor, from Last-Event-ID and from an
 * instant) are called with each of the four keys, with the key's own ids and with ids of the other environment and the
 * other account. Every answer (status, headers, body, stream frames) is kept, and checked against what storage holds:
 *
 * - a test key's answers carry only its account's sandbox: sandbox products (`TEST-…`), sandbox competitors, its own
 *   sandbox events; never a live product, SKU, competitor, price or event, nor the other account's sandbox events or
 *   prices;
 * - a live key's answers never carry a sandbox product, SKU, competitor, price or event;
 * - no event id, cursor (`next_cursor`, a stream's `id:` lines) or identifying header (ETag, Link, Location, any id in
 *   any other header but X-Request-Id) of one environment or account appears in another's answers, where they must be
 *   apart: live and test, and one account's sandbox and the other's (two live keys read the same catalogue). An ETag
 *   is a name for bytes: two sandboxes may share one only for the very same bytes.
 *
 * A's connector key (one-click connect: an AI client's OAuth token for /mcp) is a live key: its tools' answers are
 * held to a live key's rules, as A-live's.
 *
 * The tables are checked against the document's API-key operations and the MCP server's tool list: an operation or
 * tool added later that is not in them fails "every API-key operation and every tool is in the table".
 */

type Account = "A" | "B";
type Environment = "live" | "test";
type Party = `${Account}-${Environment}`;
const PARTIES: readonly Party[] = ["A-live", "A-test", "B-live", "B-test"];

const tag = `${Date.now().toString(36)}${crypto.getRandomValues(new Uint32Array(1))[0]!.toString(36)}`;
const LIVE_SKUS = [`ENVS-${tag}-1`, `ENVS-${tag}-2`];
/** Prices no generated offer has (the base's end in .99, .49, .95 or .00): each names who set it. */
const PRICES = {
  live: ["31415.17", "27182.17", "30000.17"],
  A: ["43210.17", "43211.17", "43209.17"],
  B: ["54321.23", "54322.23", "54320.23"],
} as const;

interface Keys {
  sub: string;
  live: string;
  test: string;
}
let keys: Record<Account, Keys>;
/**
 * Sandbox products sold by test_harbor (USD), both changed by both accounts at different prices, P twice and Q once: the
 * two sandboxes then hold the same products at the same versions, and differ only in what they were set to.
 */
let P: { id: string; sku: string };
let Q: { id: string; sku: string };
let live: { id: string; sku: string }[];
let startedAt: string;

/** What storage holds, read after every change: the truth the answers are checked against. */
const truth = {
  /** Every event in D1 (catalogue and account events), and the catalogue's in feed order. */
  liveEvents: new Set<string>(),
  catalogueEvents: [] as string[],
  liveProducts: new Set<string>(),
  liveSkus: new Set<string>(),
  liveCompetitors: new Set<string>(),
  sandboxEvents: { A: [] as string[], B: [] as string[] },
  sandboxProducts: new Set<string>(),
  sandboxSkus: new Set<string>(),
  sandboxCompetitors: new Set<string>(),
};

/** Every answer a party was given: where, what it sent (its own words may come back), and what came back. */
interface Answer {
  party: Party;
  where: string;
  sent: string;
  status: number;
  headers: [string, string][];
  body: string;
  contentType: string;
}
const answers: Answer[] = [];

const accountOf = (party: Party) => party[0] as Account;
const environmentOf = (party: Party) => party.slice(2) as Environment;
const other = (account: Account): Account => (account === "A" ? "B" : "A");
const keyOf = (party: Party) => keys[accountOf(party)][environmentOf(party)];

async function keep(party: Party, where: string, sent: string, res: Response, body?: string): Promise<Answer> {
  const answer: Answer = {
    party,
    where,
    sent,
    status: res.status,
    headers: [...res.headers],
    body: body ?? (await bodyText(res)),
    contentType: (res.headers.get("Content-Type") ?? "").split(";")[0]!.trim(),
  };
  answers.push(answer);
  return answer;
}

// ---- The party's own data and the other side's, as the calls below name them ---------------------------------------

interface Side {
  product: { id: string; sku: string };
  /** Another product the party reads. */
  second: { id: string; sku: string };
  competitor: string;
  events: string[];
}
function own(party: Party): Side {
  const account = accountOf(party);
  if (environmentOf(party) === "live") {
    return { product: live[0]!, second: live[1]!, competitor: "cmp_amazon", events: truth.catalogueEvents };
  }
  return { product: P, second: Q, competitor: "test_harbor", events: truth.sandboxEvents[account] };
}
/** What the party must not reach: the other environment's product, and the events of every other party. */
function foreign(party: Party): { product: { id: string; sku: string }; events: string[] } {
  const account = accountOf(party);
  if (environmentOf(party) === "live") return { product: P, events: [truth.sandboxEvents.A[0]!, truth.sandboxEvents.B[0]!] };
  return { product: live[0]!, events: [truth.catalogueEvents[0]!, truth.sandboxEvents[other(account)][0]!] };
}

// ---- The tables ------------------------------------------------------------------------------------------------------

interface HttpCall {
  method?: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** The answer expected (200 unless said). */
  status?: number;
}
interface StreamCall {
  stream: string;
  headers?: Record<string, string>;
}
type Exercise = HttpCall | StreamCall;

const enc = encodeURIComponent;

/** Every API-key operation of the document, as each party calls it. */
const OPERATIONS: Record<string, (party: Party) => Exercise[]> = {
  "GET /products": (party) => [
    { path: "/products" },
    { path: "/products", headers: { Accept: "application/x-ndjson" } },
    { path: `/products?sku=${own(party).product.sku}` },
    { path: `/products?sku=${own(party).product.sku}&currency=EUR` },
    { path: `/products?competitor=${own(party).competitor}` },
    { path: `/products?updated_since=${enc(startedAt)}` },
    { path: `/products?sku=${foreign(party).product.sku}` }, // the other environment's SKU: an empty list
  ],
  "GET /products/{id}": (party) => [
    { path: `/products/${own(party).product.id}` },
    { path: `/products/${own(party).product.id}?currency=JPY` },
    { path: `/products/${own(party).second.id}` },
    { path: `/products/${foreign(party).product.id}`, status: 404 },
  ],
  "GET /products/{id}/history": (party) => [
    { path: `/products/${own(party).product.id}/history` },
    { path: `/products/${own(party).second.id}/history?from=${enc(startedAt)}` },
    { path: `/products/${foreign(party).product.id}/history`, status: 404 },
  ],
  "GET /competitors": () => [{ path: "/competitors" }],
  "GET /fx-rates": () => [{ path: "/fx-rates" }],
  "GET /events": (party) => [
    { path: "/events?limit=1000" },
    { path: "/events?limit=1000&type=price.changed" },
    { path: `/events?since=${enc(startedAt)}` },
    { path: "/events?limit=1" }, // a page with a next_cursor
    { path: `/events?after=${own(party).events[0]}` },
    ...foreign(party).events.map((id) => ({ path: `/events?after=${id}`, status: 410 })),
  ],
  "GET /events/stream": (party) => [
    { stream: `?after=${own(party).events[0]}` },
    { stream: "", headers: { "Last-Event-ID": own(party).events[0]! } },
    { stream: `?since=${enc(startedAt)}` },
    ...foreign(party).events.map((id) => ({ path: `/events/stream?after=${id}`, headers: { Accept: "text/event-stream" }, status: 410 })),
    // (and its live phase, read in beforeAll while the second round of changes was made)
  ],
  "POST /test/observations": (party) => [
    {
      method: "POST",
      path: "/test/observations",
      // The party's own sandbox price again: no change, so no event the checks would miss.
      body: { observations: [harborObservation(P.sku, PRICES[accountOf(party)][2])] },
      status: environmentOf(party) === "test" ? 200 : 403,
    },
  ],
};

/** Each MCP tool's calls; `error` marks a call that must be a tool error (another side's id). */
const TOOLS: Record<string, (party: Party) => { args: Record<string, unknown>; error?: true }[]> = {
  search_products: (party) => [
    { args: { query: "Product", limit: 100 } },
    { args: { sku: own(party).product.sku } },
    { args: { sku: own(party).product.sku, currency: "EUR" } },
    { args: { competitor: own(party).competitor, limit: 100 } },
    { args: { sku: foreign(party).product.sku } },
  ],
  get_product: (party) => [
    { args: { sku: own(party).product.sku } },
    { args: { id: own(party).second.id, currency: "EUR" } },
    { args: { sku: foreign(party).product.sku }, error: true },
    { args: { id: foreign(party).product.id }, error: true },
  ],
  price_history: (party) => [
    { args: { product_id: own(party).product.id } },
    { args: { product_id: own(party).second.id, points: 2 } },
    { args: { product_id: foreign(party).product.id }, error: true },
  ],
  list_competitors: () => [{ args: {} }],
  recent_changes: (party) => [
    { args: { limit: 100 } },
    { args: { limit: 1 } },
    { args: { since: startedAt, after: own(party).events.at(-1) } },
    ...foreign(party).events.map((after) => ({ args: { after }, error: true as const })),
  ],
};

/**
 * Each MCP events method's calls (src/mcp/events/methods.ts); `error` is the JSON-RPC error a call must get. A cursor of
 * another side is no event of the party's feed: read by the instant its id carries, in the party's own feed. The
 * subscription replays the party's own feed from its first event; the other side's party cannot end it.
 */
const EVENT_CALLS: Record<string, (party: Party) => { params: Record<string, unknown>; error?: number }[]> = {
  "events/list": () => [{ params: {} }],
  "events/poll": (party) => [
    { params: { name: "price.changed", arguments: {}, cursor: null } },
    { params: { name: "price.changed", arguments: {}, cursor: own(party).events[0] } },
    { params: { name: "stock.changed", arguments: {}, cursor: own(party).events[0] } },
    ...foreign(party).events.map((cursor) => ({ params: { name: "price.changed", arguments: {}, cursor } })),
  ],
  "events/subscribe": (party) => [{ params: { ...subscriptionOf(party), cursor: own(party).events[0] } }],
  "events/unsubscribe": (party) => [{ params: subscriptionOf(opposite(party)), error: -32011 }, { params: subscriptionOf(party) }],
};

/** A party's subscription: every price change of its feed, to a URL of its own. */
const subscriptionOf = (party: Party) => ({
  name: "price.changed",
  arguments: {},
  delivery: { url: `${HOOKS_ORIGIN}/envs-${tag}-${party}`, secret: SUBSCRIPTION_SECRET },
});
const SUBSCRIPTION_SECRET = generateWebhookSecret();
/** The party of the other environment, in the other account. */
const opposite = (party: Party): Party => `${other(accountOf(party))}-${environmentOf(party) === "live" ? "test" : "live"}`;

const harborObservation = (sku: string, price: string) => ({
  sku,
  name: "x",
  competitor: { id: "test_harbor", name: "x" },
  price,
  currency: "USD",
  in_stock: true,
});

async function sandboxChange(account: Account, changes: [string, string][]) {
  const res = await call("POST", "/test/observations", {
    token: keys[account].test,
    body: { observations: changes.map(([sku, price]) => harborObservation(sku, price)) },
  });
  expect((await expectJson(res, 200)).price_changes).toBe(changes.length);
}

// ---- The calls ------------------------------------------------------------------------------------------------------

async function exercise(party: Party, operation: string, exercise: Exercise) {
  const token = keyOf(party);
  if ("stream" in exercise) {
    const res = await openStream(token, exercise.stream, exercise.headers);
    const sent = `${exercise.stream} ${JSON.stringify(exercise.headers ?? {})}`;
    const frames = readFrames(res);
    // A backfill from the party's first event reaches its last one.
    await frames.until(`id: ${own(party).events.at(-1)}`);
    await frames.close();
    await keep(party, `${operation}${exercise.stream}`, sent, res, frames.text());
    return;
  }
  const { method = "GET", path, body, headers, status = 200 } = exercise;
  const res = await call(method, path, { token, body, headers });
  const answer = await keep(party, `${operation}: ${method} ${path}`, `${path} ${JSON.stringify(body ?? "")}`, res);
  expect(answer.status, `${party} ${answer.where}: ${answer.body.slice(0, 500)}`).toBe(status);
}

async function mcp(party: Party, tool: string, args: Record<string, unknown>, error = false, token = keyOf(party)) {
  const res = await postMcp(token, toolCall(1, tool, args));
  const by = token === keyOf(party) ? "" : " (connector's OAuth token)";
  const answer = await keep(party, `MCP ${tool} ${JSON.stringify(args)}${by}`, JSON.stringify(args), res);
  expect(answer.status, answer.body).toBe(200);
  const result = JSON.parse(answer.body).result;
  expect(Boolean(result?.isError), `${party} ${answer.where}: ${answer.body.slice(0, 500)}`).toBe(error);
}

async function mcpEvents(party: Party, method: string, params: Record<string, unknown>, error?: number) {
  const res = await postMcp(keyOf(party), { jsonrpc: "2.0", id: 1, method, params });
  const answer = await keep(party, `MCP ${method} ${JSON.stringify(params)}`, JSON.stringify(params), res);
  expect(answer.status, answer.body).toBe(200);
  const body = JSON.parse(answer.body);
  if (error === undefined) expect(body.result, `${party} ${answer.where}: ${answer.body.slice(0, 500)}`).toBeDefined();
  else expect(body.error?.code, `${party} ${answer.where}: ${answer.body.slice(0, 500)}`).toBe(error);
}

beforeAll(async () => {
  installReceiver(); // the subscriptions' verification and deliveries (test/helpers/webhook-receiver.ts)
  startedAt = new Date(Date.now() - 1000).toISOString();
  const account = async (name: Account): Promise<Keys> => {
    const made = await freshAccount({ plan: "premium", sub: `envs-${name}-${tag}` });
    const test = await call("POST", "/api-keys", { token: made.token, body: { name: `${name} test`, environment: "test" } });
    return { sub: made.sub, live: made.key, test: (await expectJson(test, 201)).key };
  };
  keys = { A: await account("A"), B: await account("B") };

  await storeTodaysRates(); // the conversions below (?currency=EUR, JPY), in both environments
  // The live catalogue: two products, one changed (a live event).
  await ingest([
    { sku: LIVE_SKUS[0]!, price: PRICES.live[0] },
    { sku: LIVE_SKUS[1]!, price: PRICES.live[1] },
  ]);
  await ingest([{ sku: LIVE_SKUS[0]!, price: "31000.17" }]);
  await publishSnapshot();
  const { products } = await expectJson(await call("GET", `/products?competitor=cmp_amazon`, { token: keys.A.live }), 200);
  live = LIVE_SKUS.map((sku) => products.find((product) => product.sku === sku)!).map(({ id, sku }) => ({ id, sku }));

  // Each sandbox: P and Q changed by both, at prices of their own.
  const sold = await expectJson(await call("GET", "/products?competitor=test_harbor", { token: keys.A.test }), 200);
  const [p, q] = sold.products.map(({ id, sku }) => ({ id, sku }));
  [P, Q] = [p!, q!];
  for (const name of ["A", "B"] as const) {
    await sandboxChange(name, [
      [P.sku, PRICES[name][0]],
      [Q.sku, PRICES[name][1]],
    ]);
  }

  // The streams' live phase: each key listens while the second round is made.
  const listening = await Promise.all(
    PARTIES.map(async (party) => {
      const res = await openStream(keyOf(party));
      const frames = readFrames(res);
      await frames.until(": connected");
      return { party, res, frames };
    }),
  );
  await ingest([{ sku: LIVE_SKUS[0]!, price: PRICES.live[2] }]);
  await sandboxChange("A", [[P.sku, PRICES.A[2]]]);
  await sandboxChange("B", [[P.sku, PRICES.B[2]]]);
  await publishSnapshot();
  for (const { party, res, frames } of listening) {
    const newest = environmentOf(party) === "live" ? PRICES.live[2] : PRICES[accountOf(party)][2];
    await frames.until(`"new_price":"${newest}"`);
    await frames.close();
    await keep(party, "GET /events/stream (live phase)", "", res, frames.text());
  }

  // The truth, from storage.
  const rows = async <T>(sql: string) => (await env.DB.prepare(sql).all<T>()).results;
  for (const { id } of await rows<{ id: string }>("SELECT id FROM events")) truth.liveEvents.add(id);
  truth.catalogueEvents = (await rows<{ id: string }>("SELECT id FROM events WHERE account_id IS NULL ORDER BY seq")).map((row) => row.id);
  for (const { id, sku } of await rows<{ id: string; sku: string }>("SELECT id, sku FROM products")) {
    truth.liveProducts.add(id);
    truth.liveSkus.add(sku);
  }
  for (const { id } of await rows<{ id: string }>("SELECT id FROM competitors")) truth.liveCompetitors.add(id);
  for (const name of ["A", "B"] as const) {
    truth.sandboxEvents[name] = (await sandboxOf(keys[name].sub).events({ limit: 1000 })).map((row) => row.id);
    expect(truth.sandboxEvents[name], `${name}'s sandbox events`).toHaveLength(3);
  }
  expect(truth.catalogueEvents.length).toBeGreaterThanOrEqual(2);
  const base = sandboxBase();
  for (const product of base.products) {
    truth.sandboxProducts.add(product.id);
    truth.sandboxSkus.add(product.sku);
  }
  for (const competitor of base.competitors) truth.sandboxCompetitors.add(competitor.id);

  // Every operation, tool and stream, with each key.
  for (const party of PARTIES) {
    for (const [operation, exercises] of Object.entries(OPERATIONS)) {
      for (const each of exercises(party)) await exercise(party, operation, each);
    }
    for (const [tool, calls] of Object.entries(TOOLS)) {
      for (const { args, error } of calls(party)) await mcp(party, tool, args, error);
    }
    for (const [method, calls] of Object.entries(EVENT_CALLS)) {
      for (const { params, error } of calls(party)) await mcpEvents(party, method, params, error);
    }
  }
  // A's connector key: every tool through its OAuth token, as A's live key calls them.
  const connector = await connect(await accountToken(keys.A.sub), { clientName: "A's agent" });
  for (const [tool, calls] of Object.entries(TOOLS)) {
    for (const { args, error } of calls("A-live")) await mcp("A-live", tool, args, error, connector.tokens.access_token);
  }
}, 120_000);

// ---- What an answer holds ---------------------------------------------------------------------------------------------

/** The answer's JSON values: the body (each NDJSON line, each stream frame's data), and JSON held in strings (MCP's text). */
function valuesOf(answer: Answer): unknown[] {
  if (answer.contentType === "application/json") return [JSON.parse(answer.body)];
  if (answer.contentType === "application/x-ndjson")
    return answer.body
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line));
  if (answer.contentType === "text/event-stream") {
    return answer.body
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)));
  }
  return [];
}

/** Every string in the values, with the name of the field it is in. */
function* strings(value: unknown, field = ""): Generator<[string, string]> {
  if (typeof value === "string") {
    yield [field, value];
    if (/^[[{]/.test(value)) {
      try {
        yield* strings(JSON.parse(value), field);
      } catch {}
    }
  } else if (Array.isArray(value)) {
    for (const item of value) yield* strings(item, field);
  } else if (value && typeof value === "object") {
    for (const [name, item] of Object.entries(value)) yield* strings(item, name);
  }
}

const ID_IN_TEXT = /\b(?:evt|prd)_[0-9A-Za-z]+/g;
const WHOLE_HEADERS = ["etag", "link", "location", "content-location", "last-event-id"];

/**
 * The identifiers an answer gives its party: event ids, cursors (`next_cursor`, a stream's `id:` lines), the values of
 * ETag, Link, Location and any event or product id in another header (X-Request-Id excepted). What the party sent
 * itself is left out: an answer may say back the id it was asked about.
 */
function identifiersOf(answer: Answer): Map<string, string> {
  const found = new Map<string, string>();
  const add = (value: string, how: string) => {
    if (!answer.sent.includes(value)) found.set(value, how);
  };
  for (const value of valuesOf(answer)) {
    for (const [field, text] of strings(value)) {
      if (field === "next_cursor" || /^evt_/.test(text)) add(text, field);
    }
  }
  if (answer.contentType === "text/event-stream") {
    for (const [, id] of answer.body.matchAll(/^id: (.+)$/gm)) add(id!, "the stream's id:");
  }
  for (const [name, value] of answer.headers) {
    if (name === "x-request-id") continue;
    if (WHOLE_HEADERS.includes(name)) add(value, name);
    for (const [id] of value.matchAll(ID_IN_TEXT)) add(id, name);
  }
  return found;
}

/** Two parties whose identifiers must never meet: live and test, and the two sandboxes (live keys share one catalogue). */
const apart = (one: Party, two: Party) => environmentOf(one) !== environmentOf(two) || environmentOf(one) === "test";

const describeAnswer = (answer: Answer) => `${answer.party} ${answer.where} (${answer.status})`;

describe("environments apart", () => {
  it("every API-key operation and every tool is in the table", async () => {
    const doc = await fetchDocument();
    const keyOperations = Object.entries<Json>(doc.paths).flatMap(([path, item]) =>
      METHODS.filter((method) => item[method]?.security?.some((requirement: Json) => "ApiKey" in requirement)).map(
        (method) => `${method.toUpperCase()} ${path}`,
      ),
    );
    expect(keyOperations.length).toBeGreaterThan(0);
    expect(Object.keys(OPERATIONS).sort()).toEqual(keyOperations.sort());
    for (const party of PARTIES) {
      // A new key of the party's account and environment: a test key's minute (standard limits) is spent on the calls above.
      const created = await call("POST", "/api-keys", {
        token: await accountToken(keys[accountOf(party)].sub),
        body: { name: `${party} tools`, environment: environmentOf(party) },
      });
      const res = await postMcp((await expectJson(created, 201)).key, { jsonrpc: "2.0", id: 1, method: "tools/list" });
      const { tools } = (await res.json<{ result: { tools: { name: string }[] } }>()).result;
      expect(Object.keys(TOOLS).sort(), party).toEqual(tools.map((tool) => tool.name).sort());
    }
    expect(Object.keys(EVENT_CALLS).sort()).toEqual(Object.keys(EVENT_METHODS).sort());
  });

  it("each key was answered on every operation, tool and stream", () => {
    for (const party of PARTIES) {
      const mine = answers.filter((answer) => answer.party === party);
      for (const operation of Object.keys(OPERATIONS))
        expect(
          mine.some((a) => a.where.startsWith(operation)),
          `${party} ${operation}`,
        ).toBe(true);
      for (const tool of [...Object.keys(TOOLS), ...Object.keys(EVENT_CALLS)])
        expect(
          mine.some((a) => a.where.startsWith(`MCP ${tool} `)),
          `${party} ${tool}`,
        ).toBe(true);
      // Not vacuous: the key's own data is there to be read.
      const text = mine.map((answer) => answer.body).join("\n");
      for (const id of own(party).events) expect(text, `${party} sees its own event ${id}`).toContain(id);
      expect(text).toContain(own(party).product.id);
    }
  });

  it("a test key's answers carry only its account's sandbox", () => {
    for (const answer of answers.filter((each) => environmentOf(each.party) === "test")) {
      const account = accountOf(answer.party);
      const where = describeAnswer(answer);
      const text = `${answer.headers.map(([name, value]) => `${name}: ${value}`).join("\n")}\n${answer.body}`;
      const forbidden = [
        ...truth.liveEvents,
        ...truth.liveProducts,
        ...truth.liveSkus,
        ...truth.sandboxEvents[other(account)],
        ...[...PRICES.live, "31000.17", ...PRICES[other(account)]].map((price) => `"${price}"`),
      ];
      for (const value of forbidden) {
        if (answer.sent.includes(value)) continue; // its own request named it
        expect(text.includes(value), `${where} shows ${value}:\n${text.slice(0, 1500)}`).toBe(false);
      }
      for (const value of valuesOf(answer)) {
        for (const [field, string] of strings(value)) {
          if (answer.sent.includes(string)) continue;
          if (/^prd_/.test(string))
            expect(truth.sandboxProducts.has(string), `${where}: ${field} ${string} is no sandbox product`).toBe(true);
          if (/^evt_/.test(string)) expect(truth.sandboxEvents[account], `${where}: ${field} ${string}`).toContain(string);
          if (field === "sku") expect(truth.sandboxSkus.has(string), `${where}: sku ${string} is no sandbox SKU`).toBe(true);
          if (field === "competitor_id" || (field === "id" && /^(cmp|test)_/.test(string)))
            expect(truth.sandboxCompetitors.has(string), `${where}: competitor ${string}`).toBe(true);
        }
      }
    }
  });

  it("a live key's answers never carry a sandbox product, SKU, competitor, price or event", () => {
    const sandboxPrices = [...PRICES.A, ...PRICES.B].map((price) => `"${price}"`);
    for (const answer of answers.filter((each) => environmentOf(each.party) === "live")) {
      const where = describeAnswer(answer);
      const text = `${answer.headers.map(([name, value]) => `${name}: ${value}`).join("\n")}\n${answer.body}`;
      for (const value of [...truth.sandboxEvents.A, ...truth.sandboxEvents.B, ...truth.sandboxProducts, ...sandboxPrices]) {
        if (answer.sent.includes(value)) continue;
        expect(text.includes(value), `${where} shows ${value}:\n${text.slice(0, 1500)}`).toBe(false);
      }
      const sandboxSkus = [...text.matchAll(/\bTEST-[A-Z]+-\d{4}\b/g)].map(([sku]) => sku).filter((sku) => !answer.sent.includes(sku));
      expect(sandboxSkus, where).toEqual([]);
      for (const competitor of truth.sandboxCompetitors)
        expect(text.includes(`"${competitor}"`), `${where} shows ${competitor}`).toBe(false);
      for (const value of valuesOf(answer)) {
        for (const [field, string] of strings(value)) {
          if (answer.sent.includes(string)) continue;
          if (/^prd_/.test(string)) expect(truth.liveProducts.has(string), `${where}: ${field} ${string} is no live product`).toBe(true);
          if (/^evt_/.test(string)) expect(truth.liveEvents.has(string), `${where}: ${field} ${string} is no live event`).toBe(true);
        }
      }
    }
  });

  it("no event id, cursor or identifying header of one environment or account appears in another's answers", () => {
    /** Each identifier: who was given it, where, and (for an ETag) the bytes it named. */
    const given = new Map<string, { party: Party; where: string; how: string; body: string }[]>();
    for (const answer of answers) {
      for (const [value, how] of identifiersOf(answer)) {
        const list = given.get(value) ?? [];
        list.push({ party: answer.party, where: describeAnswer(answer), how, body: answer.body });
        given.set(value, list);
      }
    }
    expect(given.size).toBeGreaterThan(10);
    const met: string[] = [];
    for (const [value, holders] of given) {
      for (const [i, one] of holders.entries()) {
        for (const two of holders.slice(i + 1)) {
          if (one.party === two.party || !apart(one.party, two.party)) continue;
          // An ETag names bytes: two sandboxes holding the very same bytes may give the same one (it tells nothing).
          const sameBytes = one.how === "etag" && two.how === "etag" && one.body === two.body;
          if (sameBytes && environmentOf(one.party) === environmentOf(two.party)) continue;
          met.push(`${value} (${one.how}) was given to ${one.where} and to ${two.where}`);
        }
      }
    }
    expect(met).toEqual([]);
  });
});
