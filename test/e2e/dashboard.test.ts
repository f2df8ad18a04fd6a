/**
 * The dashboard in a real browser: Debian's Chromium driven by playwright-core, against the local IdP
 * (scripts/idp.ts, its own login pages) and `wrangler dev` with a fresh local D1. Runs in Node (the
 * "e2e" project in vitest.config.ts). Screenshots of each state go to test-results/dashboard/.
 * It starts everything it needs and stops all of it at the end, whatever happened.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const IDP = "http://127.0.0.1:4000";
const WORKER = "http://127.0.0.1:8787";
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const SCREENSHOTS = join(ROOT, "test-results", "dashboard");

interface Started {
  name: string;
  child: ChildProcess;
  output: string[];
}
const started: Started[] = [];
let persistDir: string | undefined;
let browser: Browser | undefined;

/** Each child leads its own process group, so stopping it also stops what it spawned (workerd). */
function start(name: string, command: string, args: string[]): Started {
  const child = spawn(command, args, { cwd: ROOT, detached: true, env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false" } });
  const entry: Started = { name, child, output: [] };
  const keep = (chunk: Buffer) => entry.output.push(chunk.toString());
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  started.push(entry);
  return entry;
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid) process.kill(-child.pid, signal);
  } catch {} // already gone
}

async function stopAll(): Promise<void> {
  await browser?.close().catch(() => {});
  await Promise.all(
    started.map(({ child }) => {
      if (child.exitCode !== null || child.signalCode !== null) return undefined;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      killGroup(child, "SIGTERM");
      const force = setTimeout(() => killGroup(child, "SIGKILL"), 5_000);
      return exited.finally(() => clearTimeout(force));
    }),
  );
  if (persistDir) rmSync(persistDir, { recursive: true, force: true });
}
// Should the run be interrupted (Ctrl-C reaches this worker, not the children's own process groups)
// or the runner go away, leave nothing behind either.
function killAllNow(): void {
  for (const { child } of started) killGroup(child, "SIGKILL");
  if (persistDir) rmSync(persistDir, { recursive: true, force: true });
}
process.once("exit", killAllNow);
process.once("disconnect", killAllNow);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    killAllNow();
    process.kill(process.pid, signal);
  });
}

function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
  });
}

/** Waits until `url` answers at all; fails early, with the process's output, if the process dies. */
async function waitForHttp(url: string, server: Started, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (server.child.exitCode !== null) throw new Error(`${server.name} exited early:\n${server.output.join("")}`);
    try {
      await fetch(url);
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  }
  throw new Error(`${server.name} did not answer ${url} within ${timeoutMs / 1000} s:\n${server.output.join("")}`);
}

let shotNumber = 0;
async function screenshot(page: Page, name: string): Promise<void> {
  shotNumber += 1;
  await page.screenshot({ path: join(SCREENSHOTS, `${String(shotNumber).padStart(2, "0")}-${name}.png`), fullPage: true });
}

const getProducts = (key: string) => fetch(`${WORKER}/products`, { headers: { Authorization: `Bearer ${key}` } });

describe("dashboard in Chromium", () => {
  afterAll(stopAll, 30_000);

  beforeAll(async () => {
    for (const [port, what] of [[4000, "the local IdP"], [8787, "the worker"]] as const) {
      if (await portInUse(port)) throw new Error(`Port ${port} is taken (is \`npm run dev\` running?); this test starts ${what} there itself.`);
    }
    rmSync(SCREENSHOTS, { recursive: true, force: true });
    mkdirSync(SCREENSHOTS, { recursive: true });
    persistDir = mkdtempSync(join(tmpdir(), "pda-e2e-"));
    const migrate = spawnSync("wrangler", ["d1", "migrations", "apply", "DB", "--local", "--persist-to", persistDir], {
      cwd: ROOT,
      encoding: "utf8",
      env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false" },
    });
    if (migrate.status !== 0) throw new Error(`Migrations failed:\n${migrate.stdout}\n${migrate.stderr}`);

    const idp = start("local IdP", "node", ["scripts/idp.ts"]);
    const vars = {
      IDP_ISSUER: IDP,
      IDP_AUDIENCE: "price-data-api",
      IDP_JWKS_URL: `${IDP}/jwks`,
      DASHBOARD_CLIENT_ID: "price-data-dashboard",
      WEBHOOK_SECRET_KEY: randomBytes(32).toString("base64"),
      WEBHOOK_ALLOW_INSECURE_URLS: "true",
    };
    const worker = start("wrangler dev", "wrangler", [
      "dev",
      "--ip", "127.0.0.1",
      "--port", "8787",
      "--persist-to", persistDir,
      "--show-interactive-dev-session=false",
      ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
    ]);
    await waitForHttp(`${IDP}/.well-known/openid-configuration`, idp);
    await waitForHttp(`${WORKER}/dashboard/assets/none`, worker, 90_000);

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
  });

  /** A fresh browser context and page; errors on our pages are collected, a failure is photographed. */
  async function openPage() {
    const context = await browser!.newContext({ viewport: { width: 1100, height: 900 } });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: WORKER });
    const page = await context.newPage();
    onTestFailed(async () => {
      await screenshot(page, "failure");
      console.error(`The page at the failure: ${page.url()}\n${await page.locator("body").innerText()}`);
    });
    // Our pages must log no error (a CSP violation would) and get no error status from the worker.
    // (The IdP's development pages are not ours: they ask for web fonts this machine cannot reach.)
    const problems: string[] = [];
    page.on("console", (message) => {
      if (message.type() === "error" && page.url().startsWith(WORKER)) problems.push(`console: ${message.text()} (${message.location().url})`);
    });
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("response", (response) => {
      if (response.url().startsWith(WORKER) && response.status() >= 400) problems.push(`${response.status()} from ${response.url()}`);
    });
    return { context, page, problems };
  }

  /** From the signed-out page through the IdP's own login page (any login and password) and back. */
  async function signIn(page: Page, photograph = false): Promise<string> {
    await page.goto(`${WORKER}/dashboard`);
    const signInButton = page.getByRole("button", { name: "Sign in" });
    await expect.poll(() => signInButton.isVisible()).toBe(true);
    if (photograph) await screenshot(page, "signed-out");
    await signInButton.click();
    await page.waitForURL(`${IDP}/**`);
    const account = `e2e-${randomBytes(4).toString("hex")}`;
    await page.locator('input[name="login"]').fill(account);
    await page.locator('input[name="password"]').fill("any password");
    if (photograph) await screenshot(page, "idp-login");
    await page.locator('button[type="submit"]').click();
    await page.waitForURL(`${WORKER}/dashboard/`);
    await expect.poll(() => page.locator("#who-name").textContent()).toBe(account);
    return account;
  }

  it("signs in at the IdP, creates a key shown once, reloads, revokes it, signs out", async () => {
    const { context, page, problems } = await openPage();
    await signIn(page, true);

    // Signed in: plan and limits, no keys yet.
    const plan = page.locator("#plan");
    await expect.poll(() => plan.textContent()).toContain("Free");
    expect(await plan.textContent()).toContain("14,400");
    await expect.poll(() => page.locator("#keys").textContent()).toContain("No keys yet");
    await screenshot(page, "signed-in");

    // Create a key: the full key is shown once, with a warning and a copy button.
    await page.getByLabel("Name of the new key").fill("E2E server");
    await page.getByRole("button", { name: "Create key" }).click();
    const keyField = page.getByLabel("Your new API key");
    await keyField.waitFor();
    const key = await keyField.inputValue();
    expect(key).toMatch(/^pda_live_[0-9A-Za-z]{46}$/);
    expect(await page.locator("#new-key").textContent()).toContain("it will not be shown again");
    await page.locator("#new-key").getByRole("button", { name: "Copy" }).click();
    await expect.poll(() => page.locator("#status").textContent()).toBe("Copied to the clipboard.");
    expect(await page.evaluate("navigator.clipboard.readText()")).toBe(key);
    await screenshot(page, "key-shown-once");

    // The key works against the API (from Node, as a server would use it).
    const products = await getProducts(key);
    expect(products.status, await products.clone().text()).toBe(200);
    expect(await products.json()).toHaveProperty("products");

    // A reload signs in again silently through the IdP session; only the prefix is left.
    await page.reload();
    await page.waitForURL(`${WORKER}/dashboard/`);
    const card = page.locator("#keys li", { hasText: "E2E server" });
    await card.waitFor();
    expect(await card.textContent()).toContain(key.slice(0, 17));
    expect(await page.content()).not.toContain(key);
    expect(await page.getByLabel("Your new API key").count()).toBe(0);
    await screenshot(page, "after-reload-prefix-only");
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, "phone-width");
    await page.setViewportSize({ width: 1100, height: 900 });

    // Rename, in a dialog whose field has the focus.
    await card.getByRole("button", { name: "Rename key “E2E server”" }).click();
    await page.keyboard.type("E2E server (renamed)"); // the current name is selected: typing replaces it
    await page.keyboard.press("Enter");
    await expect.poll(() => card.locator("h3").textContent()).toBe("E2E server (renamed)");

    // Revoke: the confirmation says it is permanent and starts on Cancel; Escape backs out.
    const revokeButton = card.getByRole("button", { name: "Revoke key “E2E server (renamed)”" });
    await revokeButton.click();
    const dialog = page.locator("#confirm-dialog");
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain("Revocation is permanent");
    expect(await page.evaluate("document.activeElement.textContent")).toBe("Cancel");
    await screenshot(page, "confirm-revoke");
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    expect(await page.evaluate("document.activeElement.textContent")).toContain("Revoke");
    expect((await getProducts(key)).status).toBe(200);
    await revokeButton.click();
    await dialog.getByRole("button", { name: "Revoke key", exact: true }).click();
    await expect.poll(() => card.locator(".badge").textContent()).toBe("Revoked");
    await screenshot(page, "revoked");

    // Refused from the very next request.
    const refused = await getProducts(key);
    expect(refused.status, await refused.clone().text()).toBe(401);

    // Sign out at the IdP (RP-initiated logout), back to the signed-out page; a reload stays signed out.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(`${IDP}/**`);
    await screenshot(page, "idp-logout");
    await page.getByRole("button", { name: /yes, sign me out/i }).click();
    await page.waitForURL(`${WORKER}/dashboard/`);
    await page.reload();
    await expect.poll(() => page.getByRole("button", { name: "Sign in" }).isVisible()).toBe(true);
    await screenshot(page, "signed-out-again");

    expect(problems).toEqual([]);
    await context.close();
  });

  it("adds a webhook (secret shown once), sends a test that arrives signed, lists its delivery, deletes it", async () => {
    const receiver = await startReceiver();
    try {
      const { context, page, problems } = await openPage();
      await signIn(page);
      await expect.poll(() => page.locator("#webhooks").textContent()).toContain("No webhooks yet");

      await page.getByLabel("Endpoint URL").fill(receiver.url);
      await page.getByLabel("Stock changed").uncheck();
      await page.getByLabel("Smallest price change to send, in percent").fill("2.5");
      await page.getByLabel("Description (optional)").fill("E2E receiver");
      await page.getByRole("button", { name: "Add webhook" }).click();
      const secretField = page.getByLabel("Signing secret");
      await secretField.waitFor();
      const secret = await secretField.inputValue();
      expect(secret).toMatch(/^whsec_/);
      const card = page.locator("#webhooks li", { hasText: receiver.url });
      await card.waitFor();
      expect(await card.textContent()).toContain("Price changed");
      expect(await card.textContent()).toContain("2.5 %");
      await screenshot(page, "webhook-secret-shown-once");

      await card.getByRole("button", { name: /^Send test/ }).click();
      await expect.poll(() => receiver.received.length, { timeout: 30_000 }).toBeGreaterThan(0);
      const delivery = receiver.received[0]!;
      expect(JSON.parse(delivery.body)).toMatchObject({ type: "webhook.test" });
      // Signed with the secret the page showed (Standard Webhooks: HMAC-SHA256 of "id.timestamp.body").
      const signed = `${delivery.headers["webhook-id"]}.${delivery.headers["webhook-timestamp"]}.${delivery.body}`;
      const expected = createHmac("sha256", Buffer.from(secret.slice("whsec_".length), "base64")).update(signed).digest("base64");
      expect(delivery.headers["webhook-signature"]).toBe(`v1,${expected}`);

      // The delivery is listed once the consumer has recorded it.
      const deliveries = page.locator("#deliveries-dialog");
      await expect
        .poll(async () => {
          await card.getByRole("button", { name: /^Deliveries/ }).click();
          await deliveries.waitFor();
          const text = (await deliveries.textContent()) ?? "";
          if (!text.includes("HTTP 200")) await deliveries.getByRole("button", { name: "Close" }).click();
          return text;
        }, { timeout: 30_000, interval: 1_000 })
        .toContain("HTTP 200");
      expect(await deliveries.textContent()).toContain("webhook.test");
      await screenshot(page, "webhook-deliveries");
      await deliveries.getByRole("button", { name: "Close" }).click();

      await card.getByRole("button", { name: /^Delete/ }).click();
      await page.locator("#confirm-dialog").getByRole("button", { name: "Delete webhook" }).click();
      await expect.poll(() => page.locator("#webhooks").textContent()).toContain("No webhooks yet");
      expect(await page.getByLabel("Signing secret").count()).toBe(0); // its secret goes with it
      await screenshot(page, "webhook-deleted");

      expect(problems).toEqual([]);
      await context.close();
    } finally {
      await receiver.close();
    }
  });
});

/** A webhook receiver on this machine (allowed by WEBHOOK_ALLOW_INSECURE_URLS): answers 200, keeps what came. */
async function startReceiver() {
  const received: Array<{ headers: Record<string, string>; body: string }> = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      received.push({ headers: req.headers as Record<string, string>, body });
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks/prices`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
