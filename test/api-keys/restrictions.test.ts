import { describe, expect, it } from "vitest";
import type { ApiError } from "../../client/index.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson, rateLimitOf, workCounts } from "../helpers/http.ts";

async function keyWith(body: object, plan: "free" | "premium" = "premium") {
  const account = await freshAccount({ plan });
  const created = await expectJson(await call("POST", "/api-keys", { token: account.token, body: { name: "restricted", ...body } }), 201);
  return { ...account, created };
}

const from = (ip: string) => ({ "CF-Connecting-IP": ip });

describe("allowed_ips", () => {
  it("admits IPv4, IPv6 and IPv4-mapped clients inside the ranges and refuses the rest with 403 naming the address", async () => {
    const { created } = await keyWith({
      allowed_ips: ["192.0.2.0/24", "2001:db8::/32", "::ffff:203.0.113.0/120", "198.51.100.7", "192.0.2.1/24"],
    });
    expect(created.allowed_ips).toEqual(["192.0.2.0/24", "2001:db8::/32", "203.0.113.0/24", "198.51.100.7/32"]);
    for (const ip of [
      "192.0.2.7",
      "::ffff:192.0.2.9",
      "2001:db8::5",
      "2001:db8:ffff::1",
      "203.0.113.200",
      "::ffff:203.0.113.1",
      "198.51.100.7",
    ]) {
      await expectJson(await call("GET", "/competitors", { token: created.key, headers: from(ip) }), 200);
    }
    for (const ip of ["192.0.3.1", "2001:db9::1", "::ffff:198.51.100.8", "198.51.100.8", "::1"]) {
      const refused = await expectJson(await call("GET", "/competitors", { token: created.key, headers: from(ip) }), 403);
      expect(refused.detail).toContain(`from ${ip};`);
    }
  });

  it("a refused request is not counted against the key and costs no D1 query", async () => {
    const { created } = await keyWith({ allowed_ips: ["192.0.2.0/24"] }, "free");
    await expectJson(await call("GET", "/competitors", { token: created.key, headers: from("192.0.2.1") }), 200);
    for (let i = 0; i < 15; i++) {
      const res = await call("GET", "/competitors", { token: created.key, headers: from("198.51.100.1") });
      await expectJson(res, 403);
      expect(workCounts(res)).toEqual({ d1: 0, keyDo: 1, otherDo: 1 }); // the key's object, then the client IP's bucket
    }
    for (let i = 0; i < 9; i++)
      await expectJson(await call("GET", "/competitors", { token: created.key, headers: from("192.0.2.1") }), 200);
    await expectJson(await call("GET", "/competitors", { token: created.key, headers: from("192.0.2.1") }), 429);
  });

  it("a change applies on the next request, and null allows anywhere again", async () => {
    const { token, created } = await keyWith({});
    expect(created.allowed_ips).toBeNull();
    await expectJson(await call("GET", "/competitors", { token: created.key, headers: from("198.51.100.1") }), 200);
    const patched = await expectJson(
      await call("PATCH", `/api-keys/${created.id}`, { token, body: { allowed_ips: ["2001:db8::/48"] } }),
      200,
    );
    expect(patched.allowed_ips).toEqual(["2001:db8::/48"]);
    await expectJson(await call("GET", "/competitors", { token: created.key, headers: from("198.51.100.1") }), 403);
    await expectJson(await call("GET", "/competitors", { token: created.key, headers: from("2001:db8:0:1::1") }), 200);
    await expectJson(await call("PATCH", `/api-keys/${created.id}`, { token, body: { allowed_ips: null } }), 200);
    await expectJson(await call("GET", "/competitors", { token: created.key, headers: from("198.51.100.1") }), 200);
  });

  it.each([
    [["10.0.0.1/33"]],
    [["fe80::1%eth0"]],
    [["010.0.0.1"]],
    [["example.com"]],
    [[""]],
    [[42]],
    ["10.0.0.0/8"],
    [Array.from({ length: 51 }, (_, i) => `10.0.${i}.0/24`)],
  ])("refuses allowed_ips %j with 400 naming the field", async (allowed_ips) => {
    const { token } = await freshAccount();
    const res = await expectJson(await call("POST", "/api-keys", { token, body: { name: "x", allowed_ips } }), 400);
    expect(res.detail).toMatch(/allowed_ips/);
  });
});

describe("scopes", () => {
  const routes = [
    ["/products", "products:read"],
    ["/products/prd_nope", "products:read"],
    ["/competitors", "products:read"],
    ["/products/prd_nope/history", "history:read"],
    ["/events", "events:read"],
  ] as const;

  it("each data route needs its scope: 403 naming it outside, the route's own answer inside", async () => {
    for (const scope of ["products:read", "history:read", "events:read"] as const) {
      const { created } = await keyWith({ scopes: [scope] });
      expect(created.scopes).toEqual([scope]);
      for (const [path, needs] of routes) {
        const res = await call("GET", path, { token: created.key });
        if (needs === scope) {
          expect(res.status, `${scope} ${path}`).not.toBe(403);
          expect(res.status, `${scope} ${path}`).toBeLessThan(500);
        } else {
          expect((await expectJson<ApiError>(res, 403)).detail, `${scope} ${path}`).toContain(`lacks the ${needs} scope`);
        }
      }
    }
  });

  it("GET /events/stream needs events:read: 403 naming it before any stream opens, a stream with it", async () => {
    const { created: withoutEvents } = await keyWith({ scopes: ["products:read", "history:read"] }, "free");
    const refused = await call("GET", "/events/stream", { token: withoutEvents.key, headers: { Accept: "text/event-stream" } });
    expect((await expectJson(refused, 403)).detail).toContain("lacks the events:read scope");
    expect(rateLimitOf(refused)).toMatchObject({ limit: 30, remaining: 29 }); // the client IP's bucket, not the key's
    const { created: eventsOnly } = await keyWith({ scopes: ["events:read"] }, "free");
    const stream = await call("GET", "/events/stream", { token: eventsOnly.key, headers: { Accept: "text/event-stream" } });
    expect(stream.status).toBe(200);
    expect(stream.headers.get("Content-Type")).toContain("text/event-stream");
    await stream.body!.cancel();
  });

  it("defaults to all four, and a PATCH narrows them from the next request", async () => {
    const { token, created } = await keyWith({});
    expect(created.scopes).toEqual(["products:read", "history:read", "events:read", "sandbox:write"]);
    await expectJson(await call("GET", "/events", { token: created.key }), 200);
    const patched = await expectJson(
      await call("PATCH", `/api-keys/${created.id}`, { token, body: { scopes: ["history:read", "products:read", "products:read"] } }),
      200,
    );
    expect(patched.scopes).toEqual(["products:read", "history:read"]);
    await expectJson(await call("GET", "/events", { token: created.key }), 403);
    await expectJson(await call("GET", "/competitors", { token: created.key }), 200);
  });

  it.each([[[]], [["products:write"]], ["products:read"], [null]])("refuses scopes %j with 400 naming the field", async (scopes) => {
    const { token } = await freshAccount();
    expect((await expectJson(await call("POST", "/api-keys", { token, body: { name: "x", scopes } }), 400)).detail).toMatch(/scopes/);
  });
});

describe("rotation", () => {
  it("copies allowed_ips and scopes to the successor", async () => {
    const { token, created } = await keyWith({ allowed_ips: ["192.0.2.0/24"], scopes: ["events:read"] });
    const successor = await expectJson(await call("POST", `/api-keys/${created.id}/rotate`, { token, body: { grace_seconds: 0 } }), 201);
    expect(successor).toMatchObject({ allowed_ips: ["192.0.2.0/24"], scopes: ["events:read"] });
    await expectJson(await call("GET", "/events", { token: successor.key, headers: from("192.0.2.3") }), 200);
    await expectJson(await call("GET", "/events", { token: successor.key, headers: from("198.51.100.3") }), 403);
    await expectJson(await call("GET", "/competitors", { token: successor.key, headers: from("192.0.2.3") }), 403);
    const listed = await expectJson(await call("GET", "/api-keys", { token }), 200);
    expect(listed.api_keys.find((k) => k.id === successor.id)).toMatchObject({ allowed_ips: ["192.0.2.0/24"], scopes: ["events:read"] });
  });
});

describe("a request refused by the key's restrictions", () => {
  /** 30 refusals from one address fill its bucket: the 31st is 429 with that bucket's headers, the key's quota never shown. */
  async function refusedFromOneAddress(key: string, path: string, ip: string) {
    for (let i = 1; i <= 30; i++) {
      const res = await call("GET", path, { token: key, headers: from(ip) });
      await expectJson(res, 403);
      expect(rateLimitOf(res)).toMatchObject({ limit: 30, remaining: 30 - i });
      expect(rateLimitOf(res).policy).toContain('"minute";q=30;');
    }
    const throttled = await call("GET", path, { token: key, headers: from(ip) });
    expect((await expectJson<ApiError>(throttled, 429)).detail).toMatch(/30 requests per minute/);
    expect(rateLimitOf(throttled)).toMatchObject({ limit: 30, remaining: 0 });
    expect(rateLimitOf(throttled).retryAfter).toBeGreaterThan(0);
  }

  it("outside allowed_ips counts in the client IP's bucket (30 a minute) and carries its headers", async () => {
    const { created } = await keyWith({ allowed_ips: ["192.0.2.0/24"] }, "free");
    await refusedFromOneAddress(created.key, "/competitors", "203.0.113.201");
    // The key's own quota is untouched: its address still gets all 10.
    const admitted = await call("GET", "/competitors", { token: created.key, headers: from("192.0.2.1") });
    await expectJson(admitted, 200);
    expect(rateLimitOf(admitted)).toMatchObject({ limit: 10, remaining: 9 });
  });

  it("outside its scopes counts in the client IP's bucket (30 a minute) and carries its headers", async () => {
    const { created } = await keyWith({ scopes: ["events:read"] }, "free");
    await refusedFromOneAddress(created.key, "/competitors", "203.0.113.202");
    const admitted = await call("GET", "/events", { token: created.key, headers: from("203.0.113.203") });
    await expectJson(admitted, 200);
    expect(rateLimitOf(admitted)).toMatchObject({ limit: 10, remaining: 9 });
  });
});
