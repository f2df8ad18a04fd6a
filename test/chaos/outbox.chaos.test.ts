import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { gte } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { afterAll, expect, it, vi } from "vitest";
import type { Schemas } from "../../client/index.ts";
import { mulberry32 } from "../../scripts/seeded-random.ts";
import { meetsThreshold } from "../../src/alerts/rules.ts";
import { DEAD_LETTER_QUEUE, type WebhookMessage } from "../../src/events/messages.ts";
import { SWEEP_AFTER_MS, sweepOutbox } from "../../src/events/outbox.ts";
import worker from "../../src/index.ts";
import { database } from "../../src/platform/db.ts";
import { events, webhooks } from "../../src/platform/tables.ts";
import { DELIVERY_TIMEOUT_MS, PROBE_TIMEOUT_MS } from "../../src/webhooks/delivery/attempt.ts";
import { MAX_ATTEMPTS } from "../../src/webhooks/delivery/schedule.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { adminToken } from "../helpers/tokens.ts";
import { hang, hookUrl, installReceiver, type ReceivedRequest } from "../helpers/webhook-receiver.ts";
import { createWebhook, endpointSettled, observation, QUEUE_NAME, spyOnDeliveryQueues } from "../helpers/webhooks.ts";

/**
 * "Nothing lost", by fault injection. Price changes are ingested while every send to WEBHOOK_QUEUE
 * fails at random (injected), and receivers answer 500, hang past the delivery timeout, or succeed
 * at random. The queue is emulated in this isolate (so that retries need no waiting): a retried
 * message comes back with attempts + 1, and after the last attempt goes to the dead-letter queue's
 * consumer. The outbox sweep runs as the cron would (its clock moved past SWEEP_AFTER_MS), and
 * webhooks whose deliveries were dead-lettered are replayed with only_failed, as a customer would.
 * Then: every matching (event, webhook) pair reached its receiver at least once with a signature
 * standardwebhooks accepts, no pair that does not match was sent, and GET /events holds every
 * event exactly once.
 */

const CHANGES = Number(env.CHAOS_CHANGES ?? "400");
const SEND_FAILURE = 0.25;
const RECEIVER_500 = 0.3;
const RECEIVER_HANG = 0.1;

/** A seeded generator (mulberry32), so a failing run can be told apart and its seed quoted. */
const seed = Date.now() % 2 ** 31;
const random = mulberry32(seed);

const counts = {
  ingestions: 0,
  changes: 0,
  sendFailures: 0,
  attempts: 0,
  answered500: 0,
  timedOut: 0,
  succeeded: 0,
  deadLettered: 0,
  replayed: 0,
  sweeps: 0,
};
const pending: { body: WebhookMessage; attempts: number }[] = [];
const deadLetters: WebhookMessage[] = [];
const successes: ReceivedRequest[] = [];
const hookIds: string[] = [];

afterAll(() => vi.restoreAllMocks());

/** Every queue's sendBatch (events, and deliveries over every delivery queue): fails at random (an injected fault), else queues the messages here. */
function injectQueueFaults() {
  for (const spy of spyOnDeliveryQueues().spies)
    spy.mockImplementation(async (batch) => {
      if (random() < SEND_FAILURE) {
        counts.sendFailures++;
        throw new Error("injected fault: queue send failed");
      }
      for (const message of batch) pending.push({ body: message.body as WebhookMessage, attempts: 1 });
      return {} as QueueSendBatchResponse;
    });
  // The delivery timeouts (15 s, 5 s for a failing endpoint's probe) fire at once, so a hanging receiver costs nothing.
  const realTimeout = AbortSignal.timeout.bind(AbortSignal);
  vi.spyOn(AbortSignal, "timeout").mockImplementation((ms) => {
    if (ms !== DELIVERY_TIMEOUT_MS && ms !== PROBE_TIMEOUT_MS) return realTimeout(ms);
    const controller = new AbortController();
    setTimeout(() => controller.abort(new DOMException("The operation timed out.", "TimeoutError")), 2);
    return controller.signal;
  });
}

let batches = 0;
async function runBatch(queue: string, items: { body: WebhookMessage; attempts: number }[]) {
  const batch = createMessageBatch(
    queue,
    items.map((item) => ({ id: `chaos-${++batches}`, timestamp: new Date(), attempts: item.attempts, body: item.body })),
  );
  const ctx = createExecutionContext();
  const handler: ExportedHandlerQueueHandler<typeof env> = worker.queue;
  let threw = false;
  await Promise.resolve(handler(batch, env, ctx)).catch(() => (threw = true));
  const result = await getQueueResult(batch, ctx);
  const retried = new Set(result.retryMessages.map((r) => r.msgId));
  return items.filter((_, i) => threw || retried.has(batch.messages[i]!.id));
}

/** Runs the emulated queue until it is empty: retries come back with attempts + 1, the last one goes to the dead-letter queue. */
async function drain() {
  do {
    while (pending.length > 0) {
      const items = pending.splice(0, 10);
      for (const item of await runBatch(QUEUE_NAME, items)) {
        if (item.attempts >= MAX_ATTEMPTS) deadLetters.push(item.body);
        else pending.push({ body: item.body, attempts: item.attempts + 1 });
      }
    }
    // The webhooks' objects make what was handed to them (the first deliveries, those to failing endpoints); their retries come back here.
    for (const id of hookIds) await endpointSettled(id, 120_000);
  } while (pending.length > 0);
  while (deadLetters.length > 0) {
    const items = deadLetters.splice(0, 10).map((body) => ({ body, attempts: 1 }));
    counts.deadLettered += items.length;
    await runBatch(DEAD_LETTER_QUEUE, items); // records final failures; hands events back to the sweep
  }
}

/** The cron's sweep, its clock past the relay's chance. */
async function sweep() {
  counts.sweeps++;
  await sweepOutbox(database(env.DB), env.WEBHOOK_QUEUE, Date.now() + SWEEP_AFTER_MS + 1000);
}

it(`loses nothing: ${CHANGES} price and stock changes under injected queue and receiver faults`, async () => {
  const started = Date.now();
  const since = new Date(started - 1000).toISOString();
  const receiver = installReceiver();
  const [alice, bob] = await Promise.all([freshAccount().then((a) => a.token), freshAccount().then((a) => a.token)]);
  const specs: [string, Record<string, unknown>][] = [
    [alice, {}],
    [alice, { events: ["price.changed"], min_change_pct: 5 }],
    [alice, { events: ["stock.changed"] }],
    [bob, { min_change_pct: 20 }],
    [bob, { events: ["price.changed"] }],
  ];
  const hooks: (Schemas["CreatedWebhook"] & { token: string })[] = [];
  for (const [token, body] of specs) hooks.push({ ...(await createWebhook(token, { url: hookUrl("chaos"), ...body })), token });
  hookIds.push(...hooks.map((hook) => hook.id));
  for (const hook of hooks) {
    receiver.respond(hook.url, (request) => {
      counts.attempts++;
      const roll = random();
      if (roll < RECEIVER_500) {
        counts.answered500++;
        return new Response("injected fault: receiver error", { status: 500 });
      }
      if (roll < RECEIVER_500 + RECEIVER_HANG) {
        counts.timedOut++;
        return hang(request);
      }
      counts.succeeded++;
      successes.push(request);
      return new Response("ok");
    });
  }
  injectQueueFaults();
  const logged = vi.spyOn(console, "error").mockImplementation(() => {}); // the relay's and fan-out's logs of the injected faults
  const reader = await freshAccount({ plan: "premium" });
  const admin = await adminToken();

  // Ingest: 20 SKUs × 2 competitors; each call moves prices and flips stock at random.
  const prices = new Map<string, number>();
  const skus = Array.from({ length: 20 }, (_, i) => `CHAOS-${seed}-${i}`);
  const competitors = [
    { id: "cmp_chaos_a", name: "Chaos A" },
    { id: "cmp_chaos_b", name: "Chaos B" },
  ];
  while (counts.changes < CHANGES) {
    const observations = Array.from({ length: 10 }, () => {
      const sku = skus[Math.floor(random() * skus.length)]!;
      const competitor = competitors[Math.floor(random() * 2)]!;
      const key = `${sku} ${competitor.id}`;
      const price = Math.max(100, Math.round((prices.get(key) ?? 1000) * (0.7 + random() * 0.6)));
      prices.set(key, price);
      return observation({ sku, competitor, price: (price / 100).toFixed(2), in_stock: random() > 0.2 });
    });
    const result = await expectJson(await call("POST", "/admin/observations", { token: admin, body: { observations } }), 200);
    counts.ingestions++;
    counts.changes += result.price_changes + result.stock_changes;
    if (counts.ingestions % 4 === 0) await drain();
    if (counts.ingestions % 7 === 0) await sweep();
  }

  // Settle: sweeps, retries, dead letters, and a replay of what was dead-lettered, until nothing moves.
  for (let round = 0; round < 30; round++) {
    await sweep();
    await drain();
    const before = counts.deadLettered;
    for (const hook of hooks) {
      // A replay whose send met the injected fault is a 503: asked again, as a client would. Those retries count
      // against the account's 60 a minute, so a 429 is waited out for its Retry-After, as a client would too.
      let res: Response;
      do {
        res = await call("POST", `/webhooks/${hook.id}/replay`, { token: hook.token, body: { since, only_failed: true } });
        if (res.status === 429) await new Promise((resolve) => setTimeout(resolve, Number(res.headers.get("Retry-After")) * 1000));
      } while (res.status === 503 || res.status === 429);
      counts.replayed += (await expectJson<Schemas["ReplayQueued"]>(res, 202)).queued;
    }
    await drain();
    if (pending.length === 0 && counts.deadLettered === before && (await missingPairs()).length === 0) break;
  }

  async function expectedPairs(): Promise<Set<string>> {
    const rows = await database(env.DB).select().from(events).where(gte(events.timestamp, since)).all();
    const stored = await database(env.DB).select().from(webhooks).all();
    const pairs = new Set<string>();
    for (const row of rows) {
      for (const hook of stored.filter((w) => hooks.some((h) => h.id === w.id))) {
        if (!(hook.events as string[]).includes(row.type)) continue;
        if (row.type === "price.changed" && !meetsThreshold(hook.minChangeBp, row.oldMinor, row.newMinor)) continue;
        pairs.add(`${row.id} ${hook.id}`);
      }
    }
    return pairs;
  }
  function deliveredPairs(): { pairs: Set<string>; badSignatures: number } {
    const pairs = new Set<string>();
    let badSignatures = 0;
    for (const request of successes) {
      const hook = hooks.find((h) => h.url === request.url)!;
      try {
        new Webhook(hook.secret).verify(request.body, request.headers);
        pairs.add(`${request.headers["webhook-id"]} ${hook.id}`);
      } catch {
        badSignatures++;
      }
    }
    return { pairs, badSignatures };
  }
  async function missingPairs() {
    const delivered = deliveredPairs().pairs;
    return [...(await expectedPairs())].filter((pair) => !delivered.has(pair));
  }

  const expected = await expectedPairs();
  const { pairs: delivered, badSignatures } = deliveredPairs();

  // The feed, paged through the API: every event once.
  const feed: string[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor ? `after=${cursor}` : `since=${since}`;
    const page: { events: { id: string }[]; next_cursor: string | null } = await expectJson(
      await call("GET", `/events?${query}&limit=1000`, { token: reader.key }),
      200,
    );
    feed.push(...page.events.map((e) => e.id));
    cursor = page.next_cursor;
  } while (cursor);

  const stored = await database(env.DB).select({ id: events.id }).from(events).where(gte(events.timestamp, since)).all();
  console.log(
    JSON.stringify({
      chaos: {
        seed,
        errorsLogged: logged.mock.calls.length,
        seconds: Math.round((Date.now() - started) / 1000),
        ...counts,
        events: stored.length,
        feed: feed.length,
        expectedPairs: expected.size,
        deliveredPairs: delivered.size,
        badSignatures,
      },
    }),
  );
  expect(badSignatures).toBe(0);
  expect(
    [...expected].filter((pair) => !delivered.has(pair)),
    "matching (event, webhook) pairs never delivered",
  ).toEqual([]);
  expect(
    [...delivered].filter((pair) => !expected.has(pair)),
    "pairs delivered that do not match",
  ).toEqual([]);
  expect(stored.length).toBe(counts.changes);
  expect(new Set(feed).size).toBe(feed.length);
  expect(new Set(feed)).toEqual(new Set(stored.map((row) => row.id)));
  expect(counts.sendFailures).toBeGreaterThan(0); // the faults did happen
  expect(counts.answered500 + counts.timedOut).toBeGreaterThan(0);
  receiver.assertNoStrayRequests();
});
