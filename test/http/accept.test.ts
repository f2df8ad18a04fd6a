import { describe, expect, it } from "vitest";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";

/**
 * Content negotiation (src/http/accept.ts): an Accept that admits none of what a route answers with is 406 naming what
 * it does answer with, before the route runs; wildcards, a missing Accept and q-values keep working.
 */

describe("Accept", () => {
  it("text/csv on a JSON route is 406 naming what the route serves, not JSON it did not ask for", async () => {
    const { key } = await freshAccount();
    const products = await expectJson(await call("GET", "/products", { token: key, headers: { Accept: "text/csv" } }), 406);
    expect(products.detail).toMatch(/text\/csv/);
    expect(products.detail).toMatch(/application\/json or application\/x-ndjson/);
    const events = await expectJson(await call("GET", "/events", { token: key, headers: { Accept: "text/event-stream" } }), 406);
    expect(events.detail).toMatch(/answers with: application\/json\. Send Accept: application\/json/);
    // The stream answers server-sent events: JSON alone is not among them.
    const stream = await expectJson(await call("GET", "/events/stream", { token: key, headers: { Accept: "application/json" } }), 406);
    expect(stream.detail).toMatch(/answers with: text\/event-stream/);
  });

  it("a refused Accept runs nothing: POST /api-keys makes no key", async () => {
    const { token } = await freshAccount();
    const before = await expectJson(await call("GET", "/api-keys", { token }), 200);
    await expectJson(await call("POST", "/api-keys", { token, body: { name: "csv" }, headers: { Accept: "text/csv" } }), 406);
    expect((await expectJson(await call("GET", "/api-keys", { token }), 200)).api_keys).toHaveLength(before.api_keys.length);
  });

  it.each([
    ["*/*", 200],
    ["application/*", 200],
    ["", 200],
    ["text/csv, application/json;q=0.1", 200],
    ["text/csv;q=1, */*;q=0.2", 200],
    ["APPLICATION/JSON", 200],
    ["application/json;q=0", 406],
    ["application/json;q=0, application/x-ndjson;q=0, */*", 406],
    ["text/html", 406],
  ])("Accept: %j on GET /competitors is %i", async (accept, status) => {
    const { key } = await freshAccount();
    const res = await call("GET", "/competitors", { token: key, headers: accept ? { Accept: accept } : {} });
    expect(res.status).toBe(status);
  });
});

describe("a date-time without an offset", () => {
  it("is refused with a detail that says to add Z or an offset", async () => {
    const { key } = await freshAccount();
    const refused = await expectJson(await call("GET", "/events?since=2026-01-31T12:00:00", { token: key }), 400);
    expect(refused.detail).toBe(
      "Invalid query: since: has no time zone: add Z for UTC or an offset such as +02:00 (e.g. 2026-01-31T12:00:00Z)",
    );
    // A malformed one still gets the general rule.
    const malformed = await expectJson(await call("GET", "/events?since=yesterday", { token: key }), 400);
    expect(malformed.detail).toMatch(/must be an ISO-8601 date or date-time/);
    await expectJson(await call("GET", "/events?since=2026-01-31T12:00:00Z", { token: key }), 200);
  });
});
