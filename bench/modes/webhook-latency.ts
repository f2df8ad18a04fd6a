import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * From an ingestion's answer to the receiver's 2xx: one price change at a time, through the fan-out
 * and a signed delivery to an HTTP receiver on 127.0.0.1. Each sample waits for its delivery before
 * the next, as a lone change in production. The first delivery is attempted right after the commit
 * (src/webhooks/delivery/immediate.ts); before that it went through wrangler dev's local queue, whose batching
 * (max_batch_timeout) was in every sample twice: the event, then the delivery.
 */

export interface WebhookLatency {
  samples: number;
  delivered: number;
  p50: number;
  p99: number;
  max: number;
  /** The ingestion call itself (request to answer), for the same changes. */
  ingestP50: number;
  ingestP99: number;
  /** One change to FAN_OUT_HOOKS webhooks at once: the most requests the receiver had open at a time, and when the last arrived. */
  fanOut: { hooks: number; delivered: number; mostAtOnce: number; lastMs: number };
}

/** Webhooks of the fan-out sample: more than one round of the six connections a Worker invocation may hold. */
const FAN_OUT_HOOKS = 10;
/** The receiver holds each fan-out request this long, so requests that overlap are seen overlapping. */
const FAN_OUT_HOLD_MS = 100;

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;

export async function webhookLatency(
  baseUrl: string,
  tokens: { admin: string; account: string },
  samples: number,
): Promise<WebhookLatency> {
  const arrivals = new Map<string, (at: number) => void>();
  let open = 0;
  let mostAtOnce = 0;
  const fanOutArrivals: number[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    const fanOut = req.url?.startsWith("/fan-out/") ?? false;
    if (fanOut) mostAtOnce = Math.max(mostAtOnce, ++open);
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const at = performance.now();
      if (fanOut) {
        fanOutArrivals.push(at);
        setTimeout(() => {
          open--;
          res.writeHead(204).end();
        }, FAN_OUT_HOLD_MS);
        return;
      }
      res.writeHead(204).end();
      const { data } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { data: { sku?: string } };
      if (data.sku) arrivals.get(data.sku)?.(at);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const api = async (method: string, path: string, token: string, body: unknown) => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${await res.text()}`);
    return res.json();
  };
  const ingest = (sku: string, price: string) =>
    api("POST", "/admin/observations", tokens.admin, {
      observations: [{ sku, name: sku, competitor: { id: "cmp_bench_hooks", name: "Bench" }, price, currency: "USD", in_stock: true }],
    });
  try {
    const hook = (await api("POST", "/webhooks", tokens.account, { url: `http://127.0.0.1:${port}/hook`, events: ["price.changed"] })) as {
      id: string;
    };
    const latencies: number[] = [];
    const ingestions: number[] = [];
    const run = Date.now();
    for (let i = 0; i < samples; i++) {
      const sku = `BENCH-HOOK-${run}-${i}`;
      await ingest(sku, "10.00"); // creates the offer: no event
      const arrived = new Promise<number>((resolve) => arrivals.set(sku, resolve));
      const sent = performance.now();
      await ingest(sku, "11.00");
      const answered = performance.now();
      ingestions.push(answered - sent);
      const at = await Promise.race([arrived, new Promise<undefined>((resolve) => setTimeout(resolve, 20_000))]);
      if (at !== undefined) latencies.push(at - answered);
    }
    await api("DELETE", `/webhooks/${hook.id}`, tokens.account, undefined).catch(() => {}); // 204 has no JSON: ignore

    // One change to FAN_OUT_HOOKS webhooks: how many requests are open at the receiver at once, and when the last arrives.
    const fanOutHooks: { id: string }[] = [];
    for (let i = 0; i < FAN_OUT_HOOKS; i++)
      fanOutHooks.push(
        (await api("POST", "/webhooks", tokens.account, { url: `http://127.0.0.1:${port}/fan-out/${i}`, events: ["price.changed"] })) as {
          id: string;
        },
      );
    const sku = `BENCH-FANOUT-${run}`;
    await ingest(sku, "10.00");
    await ingest(sku, "11.00");
    const answered = performance.now();
    const deadline = answered + 20_000;
    while (fanOutArrivals.length < FAN_OUT_HOOKS && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    for (const { id } of fanOutHooks) await api("DELETE", `/webhooks/${id}`, tokens.account, undefined).catch(() => {});
    const fanOut = {
      hooks: FAN_OUT_HOOKS,
      delivered: fanOutArrivals.length,
      mostAtOnce,
      lastMs: (fanOutArrivals.at(-1) ?? NaN) - answered,
    };

    const sorted = latencies.sort((a, b) => a - b);
    const ingestSorted = ingestions.sort((a, b) => a - b);
    return {
      samples,
      delivered: sorted.length,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      max: sorted.at(-1) ?? NaN,
      ingestP50: percentile(ingestSorted, 50),
      ingestP99: percentile(ingestSorted, 99),
      fanOut,
    };
  } finally {
    server.close();
  }
}

const ms = (n: number) => (Number.isNaN(n) ? "–" : n.toFixed(0));

/** The report's section (bench/report/full.ts, and `npm run bench -- --webhooks`). */
export function webhookLatencyReport(h: WebhookLatency): string[] {
  return [
    `**Webhook latency** (ours): ${h.samples} price changes, one at a time, from the ingestion's answer to the receiver's 2xx (127.0.0.1), ` +
      "the first attempt made right after the commit by the ingestion's own invocation (src/webhooks/delivery/immediate.ts); the ingestion's own time beside it:",
    "",
    "| delivered | p50 ms | p99 ms | max ms | ingestion p50 ms | ingestion p99 ms |",
    "|---:|---:|---:|---:|---:|---:|",
    `| ${h.delivered}/${h.samples} | ${ms(h.p50)} | ${ms(h.p99)} | ${ms(h.max)} | ${ms(h.ingestP50)} | ${ms(h.ingestP99)} |`,
    "",
    `One change to ${h.fanOut.hooks} webhooks (the receiver holds each request ${FAN_OUT_HOLD_MS} ms): ${h.fanOut.delivered}/${h.fanOut.hooks} delivered, ` +
      `at most ${h.fanOut.mostAtOnce} requests open at once, the last ${ms(h.fanOut.lastMs)} ms after the ingestion's answer.`,
  ];
}
