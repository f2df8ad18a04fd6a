import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { newEventId } from "../../src/platform/ids.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { STREAM_HUB_COUNT } from "../../src/stream/limits.ts";
import { publishToStreams } from "../../src/stream/publish.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { createProduct, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { call, expectJson, WORK_COUNT_FIELDS, workMeter } from "../helpers/http.ts";
import { statementsOf } from "../helpers/statements.ts";

/**
 * X-Work-Counts, the meter the bench's costs (docs/costs.json) and the model are read from: every field on every
 * response, and what it says checked against what the request did, from outside the meter.
 */

let owner: Awaited<ReturnType<typeof freshAccount>>;
let productId: string;

beforeAll(async () => {
  owner = await freshAccount();
  productId = (await createProduct({ sku: `METER-${Date.now()}` })).id;
  await publishSnapshot();
});

/**
 * A data request on a warm key, as the model prices it (data_request_admitted): the key's object is the one object
 * called, and the rows it writes to its own storage are what it reports: at most 2, the contract's target (issue 34).
 */
const KEY_OBJECT_ROWS_PER_ADMISSION = 2;

describe("X-Work-Counts", () => {
  it("has every field of the contract, in its order, then final=0|1, on a refusal, a data request and a login request", async () => {
    const responses = [
      await call("GET", "/products"),
      await call("GET", `/products/${productId}`, { token: owner.key }),
      await call("GET", "/api-keys", { token: owner.token }),
    ];
    for (const res of responses) expect(Object.keys(workMeter(res))).toEqual([...WORK_COUNT_FIELDS]);
  });

  it("a data request on a warm key: one key-object request, no other object, its object's rows written reported", async () => {
    // The first wakes the key's object and opens its first block of admissions: the block is written before the answer.
    const first = await call("GET", `/products/${productId}`, { token: owner.key });
    expect(workMeter(first)["do-rows-written"]).toBeGreaterThan(0);
    const res = await call("GET", `/products/${productId}`, { token: owner.key });
    expect(res.status).toBe(200);
    const meter = workMeter(res);
    expect(meter["key-do"]).toBe(1);
    expect(meter["other-do"]).toBe(0);
    // Within a block, nothing; a new block, its row (src/api-keys/object/reservations.ts).
    expect(meter["do-rows-written"]).toBeLessThanOrEqual(KEY_OBJECT_ROWS_PER_ADMISSION);
  });

  it("a refused request writes nothing to the client IP's object once its refusal is remembered", async () => {
    const ip = "198.51.100.77";
    let last: Response | undefined;
    for (let i = 0; i < 31; i++) last = await call("GET", "/products", { headers: { "CF-Connecting-IP": ip } });
    const refused = await call("GET", "/products", { headers: { "CF-Connecting-IP": ip } });
    expect(last!.status).toBe(429);
    expect(refused.status).toBe(429);
    expect(workMeter(refused)).toMatchObject({ "other-do": 0, "do-rows-written": 0, d1: 0 });
  });

  it("a 304 reads nothing from R2", async () => {
    const first = await call("GET", "/products", { token: owner.key });
    const etag = first.headers.get("ETag")!;
    await first.arrayBuffer();
    const res = await call("GET", "/products", { token: owner.key, headers: { "If-None-Match": etag } });
    expect(res.status).toBe(304);
    expect(workMeter(res)).toMatchObject({ "r2-a": 0, "r2-b": 0 });
  });

  it("a key-management request's D1 rows written are those its SQL writes, and its key object's writes are reported", async () => {
    const { id } = await expectJson(await call("POST", "/api-keys", { token: owner.token, body: { name: "renamed later" } }), 201);
    let res: Response | undefined;
    const statements = await statementsOf(async () => {
      res = await call("PATCH", `/api-keys/${id}`, { token: owner.token, body: { name: "renamed" } });
    });
    expect(res!.status).toBe(200);
    const writes = statements.filter((statement) => !/^\s*select/i.test(statement.sql));
    expect(writes.length).toBeGreaterThan(0);
    // Each write again, as it was sent (an update to the same values writes the same rows): what D1 says it writes.
    let rowsWritten = 0;
    for (const { sql, params } of writes) {
      rowsWritten += (
        await env.DB.prepare(sql)
          .bind(...params)
          .run()
      ).meta.rows_written;
    }
    expect(workMeter(res!)["d1-rows-written"]).toBe(rowsWritten);

    const revoked = await call("DELETE", `/api-keys/${id}`, { token: owner.token });
    expect(revoked.status).toBeLessThan(300);
    // The account's bucket only: the key's object never held this key, so it has no stream to tell.
    expect(workMeter(revoked)).toMatchObject({ "key-do": 1, "other-do": 1 });
    expect(workMeter(revoked)["do-rows-written"]).toBeGreaterThan(0); // the revocation stored in the key's object
  });

  it("a stream's connect counts its call to its hub; a revocation counts its object's push to that hub", async () => {
    const streamer = await freshAccount({ plan: "premium" });
    await (await call("GET", `/products/${productId}`, { token: streamer.key })).arrayBuffer(); // its object now holds the key
    const abort = new AbortController();
    const stream = await exports.default.fetch(
      new Request("https://api.test/events/stream", { headers: { Authorization: `Bearer ${streamer.key}` }, signal: abort.signal }),
    );
    expect(stream.status).toBe(200);
    expect(workMeter(stream)).toMatchObject({ "key-do": 1, "other-do": 1 }); // the key's object, then the account's hub

    const revoked = await call("DELETE", `/api-keys/${streamer.keyId}`, { token: streamer.token });
    expect(revoked.status).toBeLessThan(300);
    // The account's own bucket (its login's admission), and the push the key's object makes to the account's hub.
    expect(workMeter(revoked)).toMatchObject({ "key-do": 1, "other-do": 2 });
    abort.abort();
    await stream.body?.cancel().catch(() => {});
  });

  it("a publish to the stream hubs counts a call to each hub in the publishing invocation's tally", async () => {
    const work = new WorkMeter();
    await publishToStreams(env, [], work);
    expect(work.otherObjectCalls).toBe(0);
    const at = new Date().toISOString();
    const data = {
      product_id: productId,
      competitor_id: "cmp_a",
      currency: "USD",
      old_price: "12.00",
      new_price: "11.50",
      observed_at: at,
    };
    const event = { id: newEventId(at), type: "price.changed" as const, timestamp: at, data };
    await publishToStreams(env, [{ kind: "event", event, price_change: { old_minor: 1200, new_minor: 1150 } }], work);
    expect(work.otherObjectCalls).toBe(STREAM_HUB_COUNT);
  });
});
