import { createScheduledController, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { lastUsedLog } from "../../src/api-keys/object/last-used.ts";
import type { CatalogueBuilder } from "../../src/catalogue/snapshot/builder.ts";
import { catalogueBuilder } from "../../src/catalogue/snapshot/stub.ts";
import worker from "../../src/index.ts";
import type { WorkCounts } from "../../src/platform/metered.ts";
import { DELIVERY_QUEUES } from "../../src/webhooks/delivery/queues.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { createProduct, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { call, workMeter, workMeterIsFinal } from "../helpers/http.ts";
import { lastUsedMarkStored } from "../helpers/last-used.ts";
import { settled } from "../helpers/settle.ts";
import { adminToken } from "../helpers/tokens.ts";
import { runQueue, storeEvents, testEvent } from "../helpers/webhooks.ts";
import { asWorkMeter, invocationLog, type LoggedWork } from "../helpers/work-log.ts";

/**
 * Nothing escapes the meter: for each kind of invocation, the final tallies the invocations of a span log add up to
 * what the bindings themselves did over the same span, counted here at the bindings (the worker and its objects run in
 * this isolate and share its env): D1 statements (both databases: the main one and the alert windows' own), R2
 * operations by class, queue messages and calls to objects.
 */

/** What is counted at both ends. */
type Compared = Pick<WorkCounts, "d1Statements" | "r2ClassA" | "r2ClassB" | "queueSent"> & { objectCalls: number };
const noneCompared = (): Compared => ({ d1Statements: 0, r2ClassA: 0, r2ClassB: 0, queueSent: 0, objectCalls: 0 });

const R2_CLASS: Record<string, "r2ClassA" | "r2ClassB"> = { get: "r2ClassB", head: "r2ClassB", put: "r2ClassA", list: "r2ClassA" };
const NAMESPACES = [
  "API_KEY_OBJECTS",
  "RATE_LIMIT_BUCKETS",
  "CATALOGUE_BUILDER",
  "STREAM_HUB",
  "WEBHOOK_ENDPOINT",
  "LAST_USED_LOG",
  "EXPORT_RUNNER",
] as const;

/** A proxy that counts each call of `target`'s methods named by `counts` (by how much it returns for the call). */
function countingCalls<T extends object>(target: T, counts: (method: string, args: unknown[]) => number, add: (n: number) => void): T {
  return new Proxy(target, {
    get(object, property) {
      const value = Reflect.get(object, property, object);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        add(counts(property as string, args));
        return Reflect.apply(value, object, args);
      };
    },
  });
}

/** Counts what the bindings do from now until `stop`: every invocation in this isolate, whoever meters it. */
function countAtBindings(): { counted: Compared; stop(): void } {
  const counted = noneCompared();
  const spies: { mockRestore(): void }[] = [];
  const executes = (method: string) => (["run", "all", "first", "raw"].includes(method) ? 1 : 0);
  const statement = (prepared: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(prepared, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (typeof value !== "function") return value;
        if (property === "bind") return (...args: unknown[]) => statement(value.apply(target, args));
        return (...args: unknown[]) => {
          counted.d1Statements += executes(property as string);
          return value.apply(target, args);
        };
      },
    });
  for (const d1 of [env.DB, env.ALERTS_DB]) {
    const [prepare, batch] = [d1.prepare.bind(d1), d1.batch.bind(d1)];
    spies.push(vi.spyOn(d1, "prepare").mockImplementation((query: string) => statement(prepare(query))));
    spies.push(
      vi.spyOn(d1, "batch").mockImplementation(((statements: D1PreparedStatement[]) => {
        counted.d1Statements += statements.length;
        return batch(statements);
      }) as never),
    );
  }
  for (const bucket of [env.CATALOGUE, env.ARCHIVE, env.EXPORTS]) {
    for (const method of Object.keys(R2_CLASS) as (keyof R2Bucket & keyof typeof R2_CLASS)[]) {
      const real = (bucket[method] as (...args: unknown[]) => unknown).bind(bucket);
      spies.push(
        vi.spyOn(bucket, method).mockImplementation(((...args: unknown[]) => {
          counted[R2_CLASS[method]!]++;
          return real(...args);
        }) as never),
      );
    }
  }
  for (const binding of DELIVERY_QUEUES) {
    const queue = env[binding];
    const [send, sendBatch] = [queue.send.bind(queue), queue.sendBatch.bind(queue)];
    spies.push(
      vi.spyOn(queue, "send").mockImplementation(((...args: Parameters<typeof send>) => {
        counted.queueSent++;
        return send(...args);
      }) as never),
      vi.spyOn(queue, "sendBatch").mockImplementation(((messages: Iterable<MessageSendRequest>, ...rest: unknown[]) => {
        const all = [...messages];
        counted.queueSent += all.length;
        return sendBatch(all, ...(rest as []));
      }) as never),
    );
  }
  for (const name of NAMESPACES) {
    const namespace = env[name] as unknown as DurableObjectNamespace;
    const get = namespace.get.bind(namespace);
    spies.push(
      vi.spyOn(namespace, "get").mockImplementation(((...args: Parameters<typeof get>) =>
        countingCalls(
          get(...args),
          () => 1,
          (n) => (counted.objectCalls += n),
        )) as never),
    );
  }
  return {
    counted,
    stop: () => {
      for (const spy of spies) spy.mockRestore();
    },
  };
}

const compared = (line: WorkCounts): Compared => ({
  d1Statements: line.d1Statements,
  r2ClassA: line.r2ClassA,
  r2ClassB: line.r2ClassB,
  queueSent: line.queueSent,
  objectCalls: line.keyObjectCalls + line.otherObjectCalls,
});

function total(lines: readonly LoggedWork[]): Compared {
  const sum = noneCompared();
  for (const line of lines) for (const [name, value] of Object.entries(compared(line))) sum[name as keyof Compared] += value;
  return sum;
}

/** Waits until no invocation has logged for a second: whatever the span set off (a build's steps, a mark) has ended. */
async function quietAfter(lines: readonly LoggedWork[]): Promise<void> {
  // Keys' objects of earlier files in this runtime release their blocks of admissions by alarm, each up to a minute
  // later, at any moment (lines with no binding work): they are not this span's, so they do not keep it waiting.
  const spans = () => lines.filter((line) => line.invocation !== "api_key_object_alarm").length;
  let seen = -1;
  for (let waited = 0; seen !== spans() && waited < 10; waited++) {
    seen = spans();
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/**
 * No catalogue build due or under way: a span starts with nothing of an earlier one running. The build run here is
 * no invocation's, so its work waits for the builder's next answer: a poke takes it, before the span.
 */
async function builderIdle(): Promise<void> {
  await runInDurableObject(catalogueBuilder(env), (builder: CatalogueBuilder) => builder.build());
  await catalogueBuilder(env).poke();
  await runInDurableObject(catalogueBuilder(env), (_, state) => state.storage.deleteAlarm());
}

/**
 * Runs `span` with the invocations' log on and the bindings counted, until everything it set off has ended; then
 * every line logged in the span adds up to what the bindings did. Returns the lines.
 */
async function expectNothingEscapes(span: () => Promise<unknown>): Promise<LoggedWork[]> {
  await builderIdle();
  const log = invocationLog();
  const bindings = countAtBindings();
  try {
    await span();
    await quietAfter(log.lines);
  } finally {
    bindings.stop();
  }
  const logged = log.lines.map((line) => `${line.invocation} ${JSON.stringify(compared(line))}`);
  expect(total(log.lines), `the lines: ${logged.join(", ")}; the bindings: ${JSON.stringify(bindings.counted)}`).toEqual(bindings.counted);
  return log.lines;
}

let owner: Awaited<ReturnType<typeof freshAccount>>;
let brand: string;

beforeAll(async () => {
  owner = await freshAccount({ plan: "premium" });
  brand = `final-${Date.now()}`;
  for (let i = 0; i < 3; i++) await createProduct({ sku: `FINAL-${Date.now()}-${i}`, brand });
  await publishSnapshot();
  await (await call("GET", "/competitors", { token: owner.key })).arrayBuffer(); // the key's object has read the key
  await lastUsedMarkStored(owner.key, owner.keyId); // and its first use's mark is stored, before any span
});

afterEach(() => vi.restoreAllMocks());

describe("the final tally", () => {
  it("a filtered list: its header leaves with final=0, and its one line holds what its body read", async () => {
    const lines = await expectNothingEscapes(async () => {
      const res = await call("GET", `/products?brand=${brand}`, { token: owner.key });
      expect(res.status).toBe(200);
      expect(workMeterIsFinal(res)).toBe(false);
      const early = workMeter(res);
      const final = await invocationLog().finalTally(res);
      for (const [field, value] of Object.entries(early)) expect(final[field as keyof typeof final]).toBeGreaterThanOrEqual(value);
    });
    expect(lines.filter((line) => line.invocation === "GET /products")).toHaveLength(1);
  });

  it("a response with nothing after its headers says final=1, and its line is its header", async () => {
    await expectNothingEscapes(async () => {
      const res = await call("GET", "/competitors", { token: owner.key });
      expect(workMeterIsFinal(res)).toBe(true);
      expect(await invocationLog().finalTally(res)).toEqual(workMeter(res));
    });
  });

  it("an MCP tool call, whose response its transport made: its line is found by the X-Request-Id it carries", async () => {
    await expectNothingEscapes(async () => {
      const res = await call("POST", "/mcp", {
        token: owner.key,
        headers: { Accept: "application/json, text/event-stream", "Content-Type": "application/json" },
        body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "list_competitors", arguments: {} } },
      });
      expect(res.status).toBe(200);
      expect(await invocationLog().finalTally(res)).toEqual(workMeter(res));
    });
  });

  it("a request with work after its answer: its line comes once that work has ended, and holds it", async () => {
    const admin = await adminToken();
    const sku = `FINAL-AFTER-${Date.now()}`;
    const competitor = { id: "cmp_a", name: "A" };
    const observe = (price: string) =>
      call("POST", "/admin/observations", {
        token: admin,
        body: { observations: [{ sku, name: "x", competitor, price, currency: "USD", in_stock: true }] },
      });
    await (await observe("10.00")).arrayBuffer();
    const lines = await expectNothingEscapes(async () => {
      const res = await observe("9.00"); // a price change: its event is published and delivered after the answer
      expect(res.status).toBe(200);
      expect(workMeterIsFinal(res)).toBe(false);
      await invocationLog().finalTally(res);
    });
    expect(lines.filter((line) => line.invocation === "POST /admin/observations")).toHaveLength(1);
  });

  it("a queue batch", async () => {
    const event = { kind: "event" as const, event: testEvent() };
    await storeEvents([event]);
    const lines = await expectNothingEscapes(() => runQueue([event]));
    expect(lines.map((line) => line.invocation)).toContain("queue_batch");
  });

  it("an export: the request and each step of its runner count their own work on lines of their own", async () => {
    const lines = await expectNothingEscapes(async () => {
      const res = await call("POST", "/exports", { token: owner.token, body: { kind: "catalogue", format: "parquet" } });
      expect(res.status).toBe(202);
      const { id } = await res.json<{ id: string }>();
      // Its steps run in its runner's alarms, after the answer; the export's own route says when they are done.
      await settled(async () => {
        const shown = await call("GET", `/exports/${id}`, { token: owner.token });
        expect((await shown.json<{ status: string }>()).status).toBe("succeeded");
      });
    });
    expect(lines.filter((line) => line.invocation === "POST /exports")).toHaveLength(1);
    expect(lines.map((line) => line.invocation)).toContain("export_step");
  });

  it("a cron run", async () => {
    const lines = await expectNothingEscapes(() =>
      worker.scheduled(createScheduledController({ cron: "* * * * *", scheduledTime: Date.now() }), env),
    );
    expect(lines.map((line) => line.invocation)).toContain("cron_sweeps");
  });

  it("an object's alarm: the last_used flush writes D1 on its own line, and no request carries an object's later work", async () => {
    const fresh = await freshAccount();
    const shard = lastUsedLog(env, fresh.keyId); // the stub itself, not the span's counting one
    const lines = await expectNothingEscapes(async () => {
      const first = await call("GET", "/competitors", { token: fresh.key }); // marks the key's first use
      await first.arrayBuffer();
      const second = await call("GET", "/competitors", { token: fresh.key });
      // The mark's call to its shard and the rows the shard wrote are the mark's, never the next request's.
      expect(workMeter(second)).toMatchObject({ "other-do": 0 });
      expect(workMeter(second)["do-rows-written"]).toBeLessThanOrEqual(2);
      await second.arrayBuffer();
      await settled(() => expect(invocationLog().lines.map((line) => line.invocation)).toContain("last_used_mark"));
      await runDurableObjectAlarm(shard);
    });
    const flush = lines.find((line) => line.invocation === "last_used_flush");
    expect(flush && asWorkMeter(flush)["d1-statements"]).toBe(1);
  });
});
