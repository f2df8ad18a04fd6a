/**
 * `npm run dev` as a newcomer runs it: scripts/dev.ts itself (migrations, seed, the local IdP, `wrangler dev`
 * and its proxy), called on the port a user calls, with a client that sends only what `curl` sends.
 * Plain Node (the "dev" project in vitest.config.ts), after the browser test: both bind ports 8787 and 4000.
 * The D1, R2 and Durable Objects live in a temporary directory (`--persist-to`), removed at the end.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_SCOPES, DEV_AUDIENCE, DEV_ISSUER, devSigningKey } from "../../scripts/dev-idp/config.ts";
import { mintToken } from "../../scripts/mint-token.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const API = "http://127.0.0.1:8787";
const READY = "Price Data API is running.";

let dev: ChildProcess | undefined;
let persistDir: string | undefined;
/** Everything `npm run dev` printed, stdout and stderr, in order. */
let output = "";
/** What it printed before its ready banner. */
let beforeBanner = "";
let key = "";
/** The account login of the test's account (as the README's $TOKEN). */
let token = "";
/** An admin token (accounts:write prices:write), signed with the local IdP's key. */
let admin = "";

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/**
 * A request as `curl` without `--compressed` sends it: node:http adds no Accept-Encoding (fetch would add
 * `gzip, deflate`, which is exactly what must not be sent here), and nothing decodes the answer.
 */
function call(path: string, headers: Record<string, string> = {}, method = "GET", body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${API}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

const portInUse = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });

function stop(): Promise<void> {
  const child = dev;
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const kill = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal); // its process group: wrangler, workerd and the IdP with it
    } catch {} // already gone
  };
  kill("SIGTERM");
  const force = setTimeout(() => kill("SIGKILL"), 5_000);
  return exited.finally(() => clearTimeout(force));
}
process.once("exit", () => dev?.pid && process.kill(-dev.pid, "SIGKILL"));

describe("npm run dev, called as a newcomer calls it", () => {
  beforeAll(async () => {
    for (const port of [8787, 4000]) {
      if (await portInUse(port)) throw new Error(`Port ${port} is taken (is \`npm run dev\` running?); this test starts it itself.`);
    }
    persistDir = mkdtempSync(join(tmpdir(), "pda-dev-"));
    dev = spawn("node", ["scripts/dev.ts", "--persist-to", persistDir, "--show-interactive-dev-session=false"], {
      cwd: ROOT,
      detached: true,
      env: { ...process.env, CI: "true" },
    });
    const ready = new Promise<void>((resolve, reject) => {
      const keep = (chunk: Buffer) => {
        output += chunk.toString();
        if (!beforeBanner && output.includes(READY)) {
          beforeBanner = output.slice(0, output.indexOf(READY));
          resolve();
        }
      };
      dev!.stdout!.on("data", keep);
      dev!.stderr!.on("data", keep);
      dev!.once("exit", (code) => reject(new Error(`npm run dev exited (${code}) before it was ready:\n${output}`)));
    });
    await ready;
    token = await mintToken(devSigningKey(), { issuer: DEV_ISSUER, audience: DEV_AUDIENCE, sub: "dev-test" });
    const login = { Authorization: `Bearer ${token}` };
    admin = await mintToken(devSigningKey(), { issuer: DEV_ISSUER, audience: DEV_AUDIENCE, sub: "dev-test-admin", scope: ADMIN_SCOPES });
    // Premium, as the README does: a Free key's 10 requests a minute would not last this file.
    const plan = await call(
      "/admin/accounts/dev-test/plan",
      { Authorization: `Bearer ${admin}` },
      "PUT",
      JSON.stringify({ plan: "premium" }),
    );
    expect(plan.status).toBe(200);
    const created = await call("/api-keys", login, "POST", JSON.stringify({ name: "dev-server test" }));
    expect(created.status).toBe(201);
    key = (JSON.parse(created.body.toString()) as { key: string }).key;
  }, 240_000);

  afterAll(async () => {
    await stop();
    if (persistDir) rmSync(persistDir, { recursive: true, force: true });
  }, 30_000);

  it("prints one line about each database's migrations, not wrangler's table of every one", () => {
    expect(beforeBanner).toMatch(/^Local D1: applied \d+ migration\(s\) from migrations\/\.$/m);
    expect(beforeBanner).toMatch(/^Local D1 of the alert windows: applied \d+ migration\(s\) from migrations-alerts\/\.$/m);
    expect(beforeBanner).not.toContain("0000_init.sql");
    expect(beforeBanner).not.toContain("┌");
  });

  it("says before its banner only what a user needs: no IdP warnings, no bindings table, no log of its own warm-up", () => {
    expect(beforeBanner).not.toContain("oidc-provider");
    expect(beforeBanner).not.toContain("CIMD"); // the OAuth library's note that an option we leave off is off
    // wrangler's note that crons do not run locally: here they do, and the banner says so.
    expect(output).not.toContain("Scheduled Workers are not automatically triggered");
    expect(output).toContain('Crons run on wrangler.toml\'s schedules ("* * * * *", "*/1 * * * *")');
    expect(beforeBanner).not.toMatch(/following bindings/i);
    expect(beforeBanner).not.toMatch(/GET \/products/);
    expect(beforeBanner).toContain("Local IdP: http://127.0.0.1:4000");
  });

  it("answers JSON, not gzip, to a client that sends no Accept-Encoding (as curl without --compressed)", async () => {
    const res = await call("/products?brand=sony", { Authorization: `Bearer ${key}` });
    expect(res.status).toBe(200);
    expect(res.headers["content-encoding"]).toBeUndefined();
    const { products } = JSON.parse(res.body.toString()) as { products: { brand: string }[] };
    expect(products.length).toBeGreaterThan(0);
    expect(products.every((p) => p.brand === "Sony")).toBe(true);

    const whole = await call("/products", { Authorization: `Bearer ${key}`, Accept: "application/x-ndjson" });
    expect(whole.status).toBe(200);
    expect(whole.headers["content-encoding"]).toBeUndefined();
    const lines = whole.body.toString().trimEnd().split("\n");
    expect(lines.length).toBe(300);
    expect(() => lines.map((line) => JSON.parse(line))).not.toThrow();
  });

  it("answers the stored gzip to a client that asks for it (as curl --compressed)", async () => {
    const res = await call("/products?brand=sony", { Authorization: `Bearer ${key}`, "Accept-Encoding": "gzip" });
    expect(res.status).toBe(200);
    expect(res.headers["content-encoding"]).toBe("gzip");
    expect([...res.body.subarray(0, 2)]).toEqual([0x1f, 0x8b]);
  });

  it("serves a sample that looks alive: recent checks, changes and events inside the feed's 30 days, one id format", async () => {
    const started = Date.now();
    const res = await call("/products", { Authorization: `Bearer ${key}` });
    const { products } = JSON.parse(res.body.toString()) as {
      products: { id: string; name: string; offers: { checked_at: string; price_changed_at: string }[] }[];
    };
    expect(products).toHaveLength(300);
    for (const product of products) expect(product.id).toMatch(/^prd_[0-9a-f]{32}$/);
    const offers = products.flatMap((p) => p.offers);
    // Checked within the hour before the seed ran (at this test's start), changed within the last 12 days or earlier.
    for (const offer of offers) expect(started - Date.parse(offer.checked_at)).toBeLessThan(2 * 3600_000);
    const changedThisMonth = offers.filter((offer) => started - Date.parse(offer.price_changed_at) < 30 * 86_400_000);
    expect(changedThisMonth.length).toBeGreaterThan(offers.length / 2);

    const feed = await call("/events?type=price.changed&limit=1000", { Authorization: `Bearer ${key}` });
    const { events } = JSON.parse(feed.body.toString()) as { events: { id: string; timestamp: string }[] };
    expect(events.length).toBeGreaterThan(100);
    for (const event of events) expect(started - Date.parse(event.timestamp)).toBeLessThan(30 * 86_400_000);
    // And changes up to the last day or two: the feed's newest events (its first page above is its oldest).
    const recent = await call(`/events?since=${new Date(started - 2 * 86_400_000).toISOString()}`, { Authorization: `Bearer ${key}` });
    expect((JSON.parse(recent.body.toString()) as { events: unknown[] }).events.length).toBeGreaterThan(10);
  });

  it("the README's ingestion is a change of price, and the feed lists its event", async () => {
    // The observation exactly as the README sends it: it must name an offer the seed has, at another price.
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const [, body] = /POST \$API\/admin\/observations [^']*-d '([^']*)'/.exec(readme) ?? [];
    expect(body).toBeDefined();
    const observation = (JSON.parse(body!) as { observations: { sku: string; price: string }[] }).observations[0]!;
    const since = new Date(Date.now() - 1000).toISOString();
    const ingested = await call("/admin/observations", { Authorization: `Bearer ${admin}` }, "POST", body);
    expect(ingested.status).toBe(200);
    expect(JSON.parse(ingested.body.toString())).toEqual({
      received: 1,
      products_created: 0,
      offers_created: 0,
      price_changes: 1,
      stock_changes: 0,
    });

    const feed = await call(`/events?type=price.changed&since=${since}`, { Authorization: `Bearer ${key}` });
    const { events } = JSON.parse(feed.body.toString()) as { events: { type: string; data: { sku: string; new_price: string } }[] };
    expect(events.map((e) => [e.type, e.data.sku, e.data.new_price])).toEqual([["price.changed", observation.sku, observation.price]]);

    // The README's sync after it: the product, once the snapshot is rebuilt (the README waits 2 s).
    const synced = async () => {
      const res = await call(`/products?updated_since=${since}`, { Authorization: `Bearer ${key}` });
      return res.status === 200
        ? (JSON.parse(res.body.toString()) as { products: { sku: string }[] }).products.map((p) => p.sku)
        : res.status;
    };
    await expect.poll(synced, { timeout: 10_000, interval: 250 }).toEqual([observation.sku]);
  });

  it("the README's rotation leaves $KEY working past its grace, for the blocks after it (the stream, MCP)", async () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    // The "Call it" block from the rotation to its end, with a 1-second grace instead of an hour, run by bash as pasted.
    const rotation = /\n(# Rotate it[\s\S]*?)\n```/.exec(readme)?.[1];
    expect(rotation).toContain('"grace_seconds":3600');
    const mcpCall = /\n(curl -s \$API\/mcp [\s\S]*?)\n```/.exec(readme)?.[1];
    expect(mcpCall).toBeDefined();
    const keys = await call("/api-keys", { Authorization: `Bearer ${token}` });
    const keyId = (JSON.parse(keys.body.toString()) as { api_keys: { id: string; prefix: string }[] }).api_keys.find((k) =>
      key.startsWith(k.prefix),
    )!.id;
    const bash = (script: string, vars: Record<string, string>) =>
      new Promise<string>((resolve, reject) =>
        execFile(
          "bash",
          ["-c", `set -eo pipefail\n${script}`],
          { env: { ...process.env, API, TOKEN: token, ...vars } },
          (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout)),
        ),
      );
    const rotated = await bash(`${rotation!.replace('"grace_seconds":3600', '"grace_seconds":1')}\necho "KEY=$KEY"`, {
      KEY: key,
      KEY_ID: keyId,
    });
    const newKey = /^KEY=(\S+)$/m.exec(rotated)?.[1];
    expect(newKey).toMatch(/^pda_live_/);
    expect(newKey).not.toBe(key);
    await new Promise((resolve) => setTimeout(resolve, 2_000)); // the grace is over: the old key no longer works
    expect((await call("/products?sku=SON-HP-000066", { Authorization: `Bearer ${key}` })).status).toBe(401);
    // The MCP block, pasted with $KEY as the rotation left it.
    const found = JSON.parse(await bash(mcpCall!, { KEY: newKey! })) as { products: unknown[] };
    expect(found.products.length).toBeGreaterThan(0);
    // The stream's block opens (200, text/event-stream) with it; curl's --max-time ends it here.
    const stream = await bash(
      `curl -s -o /dev/null -w '%{http_code} %{content_type}' --max-time 2 "$API/events/stream?type=price.changed" ` +
        `-H "Authorization: Bearer $KEY" || true`,
      { KEY: newKey! },
    );
    expect(stream).toMatch(/^200 text\/event-stream/);
    key = newKey!; // the tests after this one call with the key that works, as the README's later blocks do
  }, 30_000);

  it("runs the crons on their schedules by itself: a key expiring within 7 days gets its api_key.expiring notice", async () => {
    const login = { Authorization: `Bearer ${token}` };
    const expiresAt = new Date(Date.now() + 3 * 86_400_000).toISOString();
    const created = await call("/api-keys", login, "POST", JSON.stringify({ name: "expiring soon", expires_at: expiresAt }));
    expect(created.status).toBe(201);
    const { id } = JSON.parse(created.body.toString()) as { id: string };
    // No one calls /cdn-cgi/local/scheduled here: the next minute's cron run writes the notice.
    for (const deadline = Date.now() + 80_000; ; await new Promise((resolve) => setTimeout(resolve, 2_000))) {
      const answer = await call("/account/events?type=api_key.expiring", login);
      const { events } = JSON.parse(answer.body.toString()) as { events: { data: { key_id: string } }[] };
      if (events.some((event) => event.data.key_id === id)) break;
      if (Date.now() > deadline) throw new Error(`no api_key.expiring notice for ${id} after 80 s:\n${output.slice(-3000)}`);
    }
  }, 90_000);

  it("runs each cron by hand at the address the README and wrangler.toml give", async () => {
    // 200 once the scheduled handler has run without throwing (a failure is a 500).
    expect((await call("/cdn-cgi/local/scheduled")).status).toBe(200);
    expect((await call("/cdn-cgi/local/scheduled?cron=*/1+*+*+*+*")).status).toBe(200);
  });

  it("the README's test-mode walk-through: a test key, its sandbox, a test webhook to npm run webhook:listen, a sandbox change", async () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const login = { Authorization: `Bearer ${token}` };
    const created = await call("/api-keys", login, "POST", JSON.stringify({ name: "my laptop", environment: "test" }));
    expect(created.status).toBe(201);
    const testKey = (JSON.parse(created.body.toString()) as { key: string }).key;
    expect(testKey).toMatch(/^pda_test_/);
    const coffee = await call("/products?category=Coffee%20Machines", { Authorization: `Bearer ${testKey}` });
    const { products } = JSON.parse(coffee.body.toString()) as { products: { sku: string }[] };
    expect(products.length).toBeGreaterThan(0);
    expect(products.every((p) => p.sku.startsWith("TEST-"))).toBe(true);

    const hook = await call("/webhooks", login, "POST", JSON.stringify({ url: "http://127.0.0.1:9000/", environment: "test" }));
    expect(hook.status).toBe(201);
    const { secret } = JSON.parse(hook.body.toString()) as { secret: string };
    // The receiver the README starts in a second terminal, started as it says.
    const listener = spawn("npm", ["run", "webhook:listen", "--", "--secret", secret], { cwd: ROOT, detached: true });
    let heard = "";
    listener.stdout!.on("data", (chunk: Buffer) => (heard += chunk.toString()));
    listener.stderr!.on("data", (chunk: Buffer) => (heard += chunk.toString()));
    try {
      await expect
        .poll(() => portInUse(9000), { timeout: 30_000, interval: 200 })
        .toBe(true)
        .catch((error: unknown) => {
          throw new Error(`the webhook receiver is not listening on 9000; it said: ${heard}`, { cause: error });
        });
      // The sandbox change exactly as the README sends it (its body spans lines there).
      const [, body] = /POST \$API\/test\/observations [^']*-d '([^']*)'/.exec(readme) ?? [];
      expect(body).toBeDefined();
      const sandboxChange = await call("/test/observations", { Authorization: `Bearer ${testKey}` }, "POST", body!.replace(/\n\s*/g, ""));
      expect(sandboxChange.status).toBe(200);
      expect(JSON.parse(sandboxChange.body.toString())).toMatchObject({ received: 1, price_changes: 1 });
      await expect.poll(() => heard, { timeout: 15_000, interval: 250 }).toContain("price.changed");
      const feed = await call("/events", { Authorization: `Bearer ${testKey}` });
      const { events } = JSON.parse(feed.body.toString()) as { events: { type: string; data: { sku: string } }[] };
      expect(events.map((e) => [e.type, e.data.sku])).toEqual([["price.changed", "TEST-CF-0001"]]);
      // A live key sees none of it.
      const live = await call("/events?type=price.changed&limit=1000", { Authorization: `Bearer ${key}` });
      const liveEvents = (JSON.parse(live.body.toString()) as { events: { data: { sku: string } }[] }).events;
      expect(liveEvents.some((e) => e.data.sku.startsWith("TEST-"))).toBe(false);
    } finally {
      try {
        process.kill(-listener.pid!, "SIGTERM");
      } catch {} // already gone
    }
  });

  it("the README's comparable prices: the seed's coffee by the kilogram, its totals, and in euros from the seed's rates", async () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const [, sku] = /CF=\$\(curl -s "\$API\/products\?sku=([^"]+)"/.exec(readme) ?? [];
    expect(sku).toBeDefined();
    const auth = { Authorization: `Bearer ${key}` };
    const listed = JSON.parse((await call(`/products?sku=${sku}`, auth)).body.toString()) as { products: { id: string }[] };
    const id = listed.products[0]!.id;
    type Offer = { price: string; currency: string; shipping_cost: string | null; total_price: string | null };
    type Read = { offers: (Offer & { unit_price: { per: string } | null; converted: { currency: string } | null })[] };
    const plain = JSON.parse((await call(`/products/${id}`, auth)).body.toString()) as Read;
    expect(plain.offers.length).toBeGreaterThan(0);
    expect(plain.offers.some((offer) => offer.unit_price?.per === "1 kg")).toBe(true); // the README's "by the kilogram"
    for (const offer of plain.offers) if (offer.shipping_cost === null) expect(offer.total_price).toBeNull();
    const euros = JSON.parse((await call(`/products/${id}?currency=EUR`, auth)).body.toString()) as Read & {
      summary: { currency: string };
    };
    expect(euros.summary.currency).toBe("EUR");
    expect(euros.offers.every((offer) => offer.converted?.currency === "EUR")).toBe(true); // the seed's day has every rate
  });
});
