/**
 * Beside the webhook latency (`npm run bench -- --webhooks`): the time from an ingestion's answer to the
 * event on an open GET /events/stream, and what an MCP tool call costs next to the REST call it wraps.
 * One change or call at a time, on the local worker.
 */

export interface StreamAndMcp {
  stream: { samples: number; received: number; p50: number; p99: number; max: number };
  mcp: { calls: number; rows: { tool: string; rest: string; mcpP50: number; restP50: number; mcpBytes: number; restBytes: number }[] };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
const median = (values: number[]) =>
  percentile(
    [...values].sort((a, b) => a - b),
    50,
  );

export async function streamAndMcp(baseUrl: string, tokens: { admin: string; account: string }, samples: number): Promise<StreamAndMcp> {
  const api = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${await res.text()}`);
    return res.json() as Promise<any>;
  };
  const ingest = (sku: string, price: string) =>
    api("POST", "/admin/observations", tokens.admin, {
      observations: [{ sku, name: sku, competitor: { id: "cmp_bench_stream", name: "Bench" }, price, currency: "USD", in_stock: true }],
    });
  const { key } = await api("POST", "/api-keys", tokens.account, { name: "bench stream" });

  // The stream: one open connection, each change waited for before the next.
  const run = Date.now();
  const arrivals = new Map<string, (at: number) => void>();
  const abort = new AbortController();
  const res = await fetch(`${baseUrl}/events/stream?type=price.changed`, {
    headers: { Authorization: `Bearer ${key}` },
    signal: abort.signal,
  });
  if (res.status !== 200 || !res.body) throw new Error(`GET /events/stream answered ${res.status}: ${await res.text()}`);
  const reading = (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = frame.split("\n").find((line) => line.startsWith("data: "));
        if (data) arrivals.get((JSON.parse(data.slice(6)) as { data: { sku: string } }).data.sku)?.(performance.now());
      }
    }
  })().catch(() => {}); // ends when aborted
  const latencies: number[] = [];
  for (let i = 0; i < samples; i++) {
    const sku = `BENCH-STREAM-${run}-${i}`;
    await ingest(sku, "10.00");
    const arrived = new Promise<number>((resolve) => arrivals.set(sku, resolve));
    await ingest(sku, "11.00");
    const answered = performance.now();
    const at = await Promise.race([arrived, new Promise<undefined>((resolve) => setTimeout(resolve, 10_000))]);
    if (at !== undefined) latencies.push(at - answered);
  }
  abort.abort();
  await reading;
  const sorted = latencies.sort((a, b) => a - b);
  const stream = { samples, received: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? NaN };

  // MCP beside REST: the same read, `calls` times each, alternating.
  const sku = `BENCH-STREAM-${run}-0`;
  const rpc = (name: string, args: Record<string, unknown>) =>
    fetch(`${baseUrl}/mcp`, {
      method: "POST",
      headers: { Authorization: `Bearer ${key}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
    });
  const found = (await (await rpc("search_products", { sku })).json()) as { result: { structuredContent: { products: { id: string }[] } } };
  const id = found.result.structuredContent.products[0]!.id;
  const calls = 20;
  const pairs: [string, string, () => Promise<Response>, () => Promise<Response>][] = [
    [
      "get_product",
      `GET /products/{id}`,
      () => rpc("get_product", { id }),
      () => fetch(`${baseUrl}/products/${id}`, { headers: { Authorization: `Bearer ${key}` } }),
    ],
    [
      "price_history",
      `GET /products/{id}/history`,
      () => rpc("price_history", { product_id: id }),
      () => fetch(`${baseUrl}/products/${id}/history`, { headers: { Authorization: `Bearer ${key}` } }),
    ],
    [
      "recent_changes",
      `GET /events?limit=20`,
      () => rpc("recent_changes", { limit: 20 }),
      () => fetch(`${baseUrl}/events?limit=20`, { headers: { Authorization: `Bearer ${key}` } }),
    ],
  ];
  const rows = [];
  for (const [tool, rest, viaMcp, viaRest] of pairs) {
    const [mcpTimes, restTimes] = [[] as number[], [] as number[]];
    let [mcpBytes, restBytes] = [0, 0];
    for (let i = 0; i < calls; i++) {
      for (const [call, times, size] of [
        [viaMcp, mcpTimes, (n: number) => (mcpBytes = n)],
        [viaRest, restTimes, (n: number) => (restBytes = n)],
      ] as const) {
        const started = performance.now();
        const answer = await call();
        const body = await answer.arrayBuffer();
        times.push(performance.now() - started);
        if (!answer.ok) throw new Error(`${tool}: ${answer.status}`);
        size(body.byteLength);
      }
    }
    rows.push({ tool, rest, mcpP50: median(mcpTimes), restP50: median(restTimes), mcpBytes, restBytes });
  }
  return { stream, mcp: { calls, rows } };
}

const ms = (n: number) => (Number.isNaN(n) ? "–" : n.toFixed(0));

export function streamAndMcpReport(r: StreamAndMcp): string[] {
  return [
    `**GET /events/stream** (one open stream, one change at a time, from the ingestion's answer to the event's frame): ` +
      `${r.stream.received}/${r.stream.samples} received, p50 ${ms(r.stream.p50)} ms, p99 ${ms(r.stream.p99)} ms, max ${ms(r.stream.max)} ms (pushed by the account's stream hub; \`npm run bench -- --stream\` measures it at 100 and 500 streams).`,
    "",
    `**MCP beside REST** (${r.mcp.calls} calls each, alternating, one at a time; an MCP call is one stateless POST /mcp):`,
    "",
    "| tool | REST call | MCP p50 ms | REST p50 ms | MCP bytes | REST bytes |",
    "|---|---|---:|---:|---:|---:|",
    ...r.mcp.rows.map(
      (row) => `| ${row.tool} | ${row.rest} | ${ms(row.mcpP50)} | ${ms(row.restP50)} | ${row.mcpBytes} | ${row.restBytes} |`,
    ),
  ];
}
