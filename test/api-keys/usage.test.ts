import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import type { ApiError, Schemas } from "../../client/index.ts";
import { hashApiKey } from "../../src/api-keys/format.ts";
import { dashboardPage } from "../../src/dashboard/page.ts";
import { DAY_MS, HOUR_MS, MINUTE_MS } from "../../src/platform/time.ts";
import { addKey, freshAccount } from "../helpers/accounts.ts";
import { fakeDateAt } from "../helpers/clock.ts";
import { call, expectJson, workCounts } from "../helpers/http.ts";
import { accountToken } from "../helpers/tokens.ts";

// A fake Date, shared by the worker and its Durable Objects in these tests. T0 is 30 s into a minute.
const T0 = Date.parse("2030-03-10T12:00:30Z");
fakeDateAt(T0);

const at = (ms: number) => vi.setSystemTime(T0 + ms);
const get = (key: string) => call("GET", "/competitors", { token: key });

/** GET of a key's usage or the account's, with `query` ("" or from "?" on). */
async function usage(token: string, path: `/api-keys/${string}/usage`, query?: string): Promise<Schemas["KeyUsage"]>;
async function usage(token: string, path: "/account/usage", query?: string): Promise<Schemas["AccountUsage"]>;
async function usage(token: string, path: string, query = "") {
  return expectJson<Schemas["KeyUsage"] | Schemas["AccountUsage"]>(await call("GET", `${path}${query}`, { token }), 200);
}
const nonZero = (buckets: Schemas["UsageBucket"][]) => buckets.filter((b) => b.admitted + b.refused > 0);
const iso = (ms: number) => new Date(ms).toISOString();

/** Sends `n` requests and returns how many were admitted and refused (429). */
async function send(key: string, n: number) {
  let admitted = 0;
  let refused = 0;
  for (let i = 0; i < n; i++) {
    const status = (await get(key)).status;
    if (status === 429) refused++;
    else admitted++;
  }
  return { admitted, refused };
}

describe("a key's usage", () => {
  it("counts admitted and refused per minute, and survives eviction", async () => {
    const { token, key, keyId } = await freshAccount({ plan: "free" });
    // 10 admitted, 5 refused, every one by the key's object.
    expect(await send(key, 15)).toEqual({ admitted: 10, refused: 5 });
    const path = `/api-keys/${keyId}/usage` as const;
    const minutes = await usage(token, path, "?granularity=minute");
    expect(minutes.key_id).toBe(keyId);
    expect(minutes.buckets).toHaveLength(1440);
    expect(minutes.buckets.at(-1)).toEqual({ start: iso(T0 - 30_000), admitted: 10, refused: 5 });
    expect(nonZero(minutes.buckets)).toHaveLength(1);
    expect(minutes.buckets[0]!.start).toBe(iso(T0 - 30_000 - 1439 * MINUTE_MS));

    // The next minute: 10 more admitted, 3 refused.
    at(MINUTE_MS);
    expect(await send(key, 13)).toEqual({ admitted: 10, refused: 3 });

    const stub = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await hashApiKey(key)));
    // Refusals within a second of the object's last write are written by its alarm at that second's end.
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    await evictDurableObject(stub);

    const after = await usage(token, path, "?granularity=minute");
    expect(nonZero(after.buckets)).toEqual([
      { start: iso(T0 - 30_000), admitted: 10, refused: 5 },
      { start: iso(T0 + 30_000), admitted: 10, refused: 3 },
    ]);
    const hours = await usage(token, path, "?granularity=hour");
    expect(hours.buckets).toHaveLength(720);
    expect(hours.buckets.at(-1)).toEqual({ start: iso(Date.parse("2030-03-10T12:00:00Z")), admitted: 20, refused: 8 });
    const days = await usage(token, path, "?granularity=day");
    expect(days.buckets).toHaveLength(365);
    expect(days.buckets.at(-1)).toEqual({ start: "2030-03-10T00:00:00.000Z", admitted: 20, refused: 8 });
  });

  it("folds minutes into hours after 24 h and hours into days after 30 days, losing no count", async () => {
    const { sub, key, keyId } = await freshAccount({ plan: "standard" });
    expect(await send(key, 7)).toEqual({ admitted: 7, refused: 0 });
    const path = `/api-keys/${keyId}/usage` as const;
    let token = "";
    const later = async (ms: number) => {
      at(ms); // the next decision folds what has left its window
      await send(key, 1);
      token = await accountToken(sub); // a login minted at the new time
    };

    await later(26 * HOUR_MS); // the first minutes are now an hour past the 24 h window: folded
    const minutes = await usage(token, path, "?granularity=minute");
    expect(nonZero(minutes.buckets)).toEqual([{ start: iso(T0 + 26 * HOUR_MS - 30_000), admitted: 1, refused: 0 }]);
    expect(nonZero((await usage(token, path, "?granularity=hour")).buckets)).toEqual([
      { start: "2030-03-10T12:00:00.000Z", admitted: 7, refused: 0 },
      { start: "2030-03-11T14:00:00.000Z", admitted: 1, refused: 0 },
    ]);

    await later(32 * DAY_MS);
    expect(nonZero((await usage(token, path, "?granularity=hour")).buckets)).toEqual([
      { start: "2030-04-11T12:00:00.000Z", admitted: 1, refused: 0 },
    ]);
    expect(nonZero((await usage(token, path, "?granularity=day")).buckets)).toEqual([
      { start: "2030-03-10T00:00:00.000Z", admitted: 7, refused: 0 },
      { start: "2030-03-11T00:00:00.000Z", admitted: 1, refused: 0 },
      { start: "2030-04-11T00:00:00.000Z", admitted: 1, refused: 0 },
    ]);

    await later(400 * DAY_MS); // after a year, the oldest days are dropped from storage
    expect(nonZero((await usage(token, path, "?granularity=day")).buckets)).toEqual([
      { start: "2031-04-14T00:00:00.000Z", admitted: 1, refused: 0 },
    ]);
    const stub = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await hashApiKey(key)));
    const stored = await runInDurableObject(stub, (_o, state) => ({
      table: state.storage.sql.exec("SELECT level, count(*) AS n FROM usage GROUP BY level").toArray(),
      current: state.storage.sql
        .exec<{ usage_hour: string }>("SELECT usage_hour FROM state")
        .toArray()
        .map((row) => JSON.parse(row.usage_hour)),
    }));
    // Only the latest minute is stored (in the object's state row, where the current hour is counted minute by minute):
    // the older counts were folded into hours, then days, then dropped.
    expect(stored).toEqual({ table: [], current: [{ start: T0 - 30_000 + 400 * DAY_MS, minutes: { 0: [1, 0] } }] });
  });

  it("from and to pick whole buckets, clipped to the window", async () => {
    const { token, key, keyId } = await freshAccount({ plan: "free" });
    await send(key, 2);
    const path = `/api-keys/${keyId}/usage` as const;
    const ranged = await usage(token, path, `?granularity=minute&from=${iso(T0 - 5 * MINUTE_MS)}&to=${iso(T0 + 1)}`);
    expect(ranged.buckets.map((b) => b.start)).toEqual([5, 4, 3, 2, 1, 0].map((n) => iso(T0 - 30_000 - n * MINUTE_MS)));
    expect(ranged.buckets.at(-1)).toMatchObject({ admitted: 2, refused: 0 });
    const clipped = await usage(token, path, "?granularity=hour&from=2000-01-01&to=2100-01-01");
    expect(clipped.buckets).toHaveLength(720);
    const outside = await usage(token, path, "?granularity=day&from=2000-01-01&to=2000-02-01");
    expect(outside.buckets).toEqual([]);
  });

  it("adds no D1 query and no second object call to a request", async () => {
    const { key } = await freshAccount({ plan: "free" });
    await get(key);
    const res = await get(key);
    expect(workCounts(res)).toEqual({ d1: 0, keyDo: 1, otherDo: 0 });
  });
});

describe("what refused counts", () => {
  it("a 403 (a scope the key lacks) counts as refused, and the document and the dashboard say refused is not only over a limit", async () => {
    const { token } = await freshAccount({ plan: "free" });
    const created = await expectJson(
      await call("POST", "/api-keys", { token, body: { name: "products only", scopes: ["products:read"] } }),
      201,
    );
    await expectJson(await call("GET", "/events", { token: created.key }), 403);
    expect(nonZero((await usage(token, `/api-keys/${created.id}/usage`, "?granularity=minute")).buckets)).toEqual([
      { start: iso(T0 - 30_000), admitted: 0, refused: 1 },
    ]);
    const document = (await (await call("GET", "/openapi.json")).json()) as {
      components: { schemas: Record<string, { properties: Record<string, { description: string }> }> };
    };
    expect(document.components.schemas.UsageBucket!.properties.refused!.description).toMatch(/\(401\).*\(403\)/);
    const page = dashboardPage({ issuer: "https://idp.test/", clientId: "c", audience: "a", assetVersion: "v" });
    expect(page).not.toMatch(/refused \(over the limit\)/);
    expect(page).toMatch(/its scopes, allowed IPs or environment \(403\)/);
  });
});

describe("the account's usage", () => {
  it("sums its keys, revoked ones included, and is the account's own", async () => {
    const { token, key, keyId } = await freshAccount({ plan: "free" });
    const second = await addKey(token);
    await send(key, 12);
    await send(second.key, 3);
    await expectJson(await call("DELETE", `/api-keys/${second.id}`, { token }), 200);
    await send(second.key, 2); // refused: revoked
    const total = await usage(token, "/account/usage", "?granularity=minute");
    expect(total.buckets).toHaveLength(1440);
    expect(nonZero(total.buckets)).toEqual([{ start: iso(T0 - 30_000), admitted: 13, refused: 4 }]);
    expect(nonZero((await usage(token, `/api-keys/${second.id}/usage`)).buckets)).toEqual([
      { start: iso(T0 - 30_000), admitted: 3, refused: 2 },
    ]);

    const stranger = await accountToken("usage-stranger");
    expect(nonZero((await usage(stranger, "/account/usage")).buckets)).toEqual([]);
    const res = await call("GET", `/api-keys/${keyId}/usage`, { token: stranger });
    expect((await expectJson(res, 404)).detail).toContain(keyId);
  });
});

describe("bad usage queries: 400 naming the field", () => {
  it.each([
    ["?granularity=week", "granularity"],
    ["?granularity=minute&granularity=hour", "granularity"],
    [`?from=2030-03-10T12:00:00Z&to=2030-03-10T11:00:00Z`, "from"],
    [`?from=2030-03-10T12:00:00Z&to=2030-03-10T12:00:00Z`, "from"],
    ["?from=yesterday", "from"],
    ["?bucket=minute", "bucket"],
  ])("%s", async (query, field) => {
    const { token, keyId } = await freshAccount({ plan: "free" });
    for (const path of [`/api-keys/${keyId}/usage`, "/account/usage"]) {
      const body = await expectJson<ApiError>(await call("GET", `${path}${query}`, { token }), 400);
      expect(body.detail).toContain(field);
    }
  });
});
