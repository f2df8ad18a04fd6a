import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { freshAccount } from "../helpers/accounts.ts";
import { createProduct, publishCatalogue } from "../helpers/catalogue-factory.ts";
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
  await publishCatalogue();
});

/**
 * A data request on a warm key, as the model prices it (data_request_admitted): the key's object is the one object
 * called, and the rows it writes to its own storage are what it reports: at most 2, the contract's target (issue 34).
 */
const KEY_OBJECT_ROWS_PER_ADMISSION = 2;

describe("X-Work-Counts", () => {
  it("has every field of the contract, in its order, on a refusal, a data request and a login request", async () => {
    const responses = [
      await call("GET", "/products"),
      await call("GET", `/products/${productId}`, { token: owner.key }),
      await call("GET", "/api-keys", { token: owner.token }),
    ];
    for (const res of responses) expect(Object.keys(workMeter(res))).toEqual([...WORK_COUNT_FIELDS]);
  });

  it("a data request on a warm key: one key-object request, no other object, its object's rows written reported", async () => {
    await call("GET", `/products/${productId}`, { token: owner.key }); // wakes the key's object and marks its use
    const res = await call("GET", `/products/${productId}`, { token: owner.key });
    expect(res.status).toBe(200);
    const meter = workMeter(res);
    expect(meter["key-do"]).toBe(1);
    expect(meter["other-do"]).toBe(0);
    expect(meter["do-rows-written"]).toBeGreaterThan(0); // the admission is counted in the key's storage
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
    expect(workMeter(revoked)).toMatchObject({ "key-do": 1 });
    expect(workMeter(revoked)["do-rows-written"]).toBeGreaterThan(0); // the revocation stored in the key's object
  });
});
