import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * From an ingestion's answer to the receiver's 2xx: one price change at a time, through the local
 * queue (wrangler dev's), the fan-out, and a signed delivery to an HTTP receiver on 127.0.0.1. Each
 * sample waits for its delivery before the next, so the queue's batching (max_batch_timeout, twice:
 * the event, then the delivery) is in every sample, as it is for a lone change in production.
 */

export interface WebhookLatency {
  samples: number;
  delivered: number;
  p50: number;
  p99: number;
  max: number;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;

export async function webhookLatency(baseUrl: string, tokens: { admin: string; account: string }, samples: number): Promise<WebhookLatency> {
  const arrivals = new Map<string, (at: number) => void>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const at = performance.now();
      res.writeHead(204).end();
      const { data } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { data: { sku?: string } };
      if (data.sku) arrivals.get(data.sku)?.(at);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const api = async (method: string, path: string, token: string, body: unknown) => {
    const res = await fetch(`${baseUrl}${path}`, { method, headers: { Authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${await res.text()}`);
    return res.json();
  };
  const ingest = (sku: string, price: string) =>
    api("POST", "/admin/observations", tokens.admin, { observations: [{ sku, name: sku, competitor: { id: "cmp_bench_hooks", name: "Bench" }, price, currency: "USD", in_stock: true }] });
  try {
    const hook = (await api("POST", "/webhooks", tokens.account, { url: `http://127.0.0.1:${port}/hook`, events: ["price.changed"] })) as { id: string };
    const latencies: number[] = [];
    const run = Date.now();
    for (let i = 0; i < samples; i++) {
      const sku = `BENCH-HOOK-${run}-${i}`;
      await ingest(sku, "10.00"); // creates the offer: no event
      const arrived = new Promise<number>((resolve) => arrivals.set(sku, resolve));
      await ingest(sku, "11.00");
      const answered = performance.now();
      const at = await Promise.race([arrived, new Promise<undefined>((resolve) => setTimeout(resolve, 20_000))]);
      if (at !== undefined) latencies.push(at - answered);
    }
    await api("DELETE", `/webhooks/${hook.id}`, tokens.account, undefined).catch(() => {}); // 204 has no JSON: ignore
    const sorted = latencies.sort((a, b) => a - b);
    return { samples, delivered: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? NaN };
  } finally {
    server.close();
  }
}

const ms = (n: number) => (Number.isNaN(n) ? "–" : n.toFixed(0));

/** The report's section (bench/report.ts, and `npm run bench -- --webhooks`). */
export function webhookLatencyReport(h: WebhookLatency): string[] {
  return [
    `**Webhook latency** (ours): ${h.samples} price changes, one at a time, from the ingestion's answer to the receiver's 2xx (127.0.0.1), ` +
      "through wrangler dev's local queue (a batch waits up to max_batch_timeout = 1 s, once for the event and once for its delivery):",
    "",
    "| delivered | p50 ms | p99 ms | max ms |",
    "|---:|---:|---:|---:|",
    `| ${h.delivered}/${h.samples} | ${ms(h.p50)} | ${ms(h.p99)} | ${ms(h.max)} |`,
  ];
}
