import { beforeAll, describe, expect, it } from "vitest";
import costs from "../../docs/costs.json";
import { forgetKeptSegments } from "../../src/catalogue/snapshot/product-read.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { createProduct, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { call, expectJson, type WorkCountField } from "../helpers/http.ts";
import { invocationLog } from "../helpers/work-log.ts";

/**
 * docs/costs.json against the code: some of the operations `npm run bench -- --costs` measures, run here through the
 * worker and read from the same meter, its final tally (each request's log line, once its body has streamed and its
 * work after the answer has ended: what the bench reads, not X-Work-Counts, which leaves before). The counts that do not grow with the data must agree, so a
 * statement or an object call added to one of these paths fails here until the bench is run again and the model
 * (npm run simulate) is fed the new figures. Rows read grow with the data, so they are not compared.
 */

type Measured = Record<
  "d1_statements" | "d1_rows_written" | "do_requests" | "do_rows_written" | "r2_class_a" | "r2_class_b" | "queue_messages",
  number
>;

/** The bench's small data request (bench/harness/start.ts SMALL_PATH): a brand no product has, one D1 batch of three reads. */
const SMALL_PATH = "/products?brand=bench-none";
const TIMES = 10;

/** The operation's final counts, averaged over TIMES runs as the bench averages them. */
async function measured(send: () => Promise<Response>, status = 200): Promise<Measured> {
  const log = invocationLog();
  const meters: Record<WorkCountField, number>[] = [];
  for (let i = 0; i < TIMES; i++) {
    const res = await send();
    meters.push(await log.finalTally(res));
    expect(res.status).toBe(status);
  }
  const mean = (of: (meter: Record<WorkCountField, number>) => number) => meters.reduce((total, meter) => total + of(meter), 0) / TIMES;
  return {
    d1_statements: mean((m) => m["d1-statements"]),
    d1_rows_written: mean((m) => m["d1-rows-written"]),
    do_requests: mean((m) => m["key-do"] + m["other-do"]),
    do_rows_written: mean((m) => m["do-rows-written"]),
    r2_class_a: mean((m) => m["r2-a"]),
    r2_class_b: mean((m) => m["r2-b"]),
    queue_messages: mean((m) => m["queue-sent"]),
  };
}

/**
 * Exact for what a path does on every call (D1 statements and rows written, object calls, R2 reads and writes, queue
 * messages), to the nearest whole one; object rows within one row: a key's object writes a block of admissions when the
 * last is used up (src/api-keys/object/reservations.ts), so whether a request writes it depends on the key's calls
 * before it, not on the path, and the hour's usage row and a refusal's row come on top now and then.
 */
function expectAsMeasured(name: keyof typeof costs.operations, got: Measured) {
  const file = costs.operations[name];
  for (const field of ["d1_statements", "d1_rows_written", "do_requests", "r2_class_a", "r2_class_b", "queue_messages"] as const) {
    expect(Math.round(got[field]), `${name}.${field}: here ${got[field]}, docs/costs.json ${file[field]}`).toBe(Math.round(file[field]));
  }
  expect(Math.abs(got.do_rows_written - file.do_rows_written), `${name}.do_rows_written: here ${got.do_rows_written}`).toBeLessThanOrEqual(
    1,
  );
}

let owner: Awaited<ReturnType<typeof freshAccount>>;
let productId: string;

beforeAll(async () => {
  owner = await freshAccount({ plan: "premium" });
  productId = (await createProduct({ sku: `DRIFT-${Date.now()}` })).id;
  await publishSnapshot();
  await call("GET", SMALL_PATH, { token: owner.key }); // wakes the key's object, as the bench does first
});

describe("docs/costs.json holds what the code does", () => {
  it("data_request_admitted", async () => {
    expectAsMeasured("data_request_admitted", await measured(() => call("GET", SMALL_PATH, { token: owner.key })));
  });

  it("data_request_refused", async () => {
    const free = await freshAccount();
    for (let i = 0; i < 10; i++) await (await call("GET", SMALL_PATH, { token: free.key })).arrayBuffer(); // its minute's 10
    expectAsMeasured("data_request_refused", await measured(() => call("GET", SMALL_PATH, { token: free.key }), 429));
  });

  it("get_product (its segment not yet kept by the isolate, as the bench measures it)", async () => {
    expectAsMeasured(
      "get_product",
      await measured(() => {
        forgetKeptSegments();
        return call("GET", `/products/${productId}`, { token: owner.key });
      }),
    );
  });

  it("events_page", async () => {
    expectAsMeasured("events_page", await measured(() => call("GET", "/events?limit=100", { token: owner.key })));
  });

  it("key_management_request", async () => {
    const { id } = await expectJson(await call("POST", "/api-keys", { token: owner.token, body: { name: "drift" } }), 201);
    let n = 0;
    expectAsMeasured(
      "key_management_request",
      await measured(() => call("PATCH", `/api-keys/${id}`, { token: owner.token, body: { name: `drift ${n++}` } })),
    );
  });
});
