/**
 * What the browser tests (test/e2e/*.test.ts) share: the local IdP, `wrangler dev` with a fresh local D1 and Debian's
 * Chromium driven by playwright-core, started by `browserHarness(…).setUp` (each file's beforeAll) and stopped by
 * `stopAll` (its afterAll), whatever happened; screenshots of each state under test-results/<name>/; and the page
 * steps more than one file takes (sign-in, a key created, a dialog closed, a webhook's deliveries).
 * The e2e project runs its files one at a time (vitest.config.ts): each binds ports 4000 and 8787.
 */
import { type ChildProcess, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Browser, chromium, type Locator, type Page } from "playwright-core";
import { expect, onTestFailed } from "vitest";
import { signalGroup, spawnGroup, stopGroups, WRANGLER_ENV } from "../../scripts/process-group.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const IDP = "http://127.0.0.1:4000";
export const WORKER = "http://127.0.0.1:8787";
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

interface Started {
  name: string;
  child: ChildProcess;
  output: string[];
}
const started: Started[] = [];
let persistDir: string | undefined;
let browser: Browser | undefined;

/** Each child leads its own process group, so stopping it also stops what it spawned (workerd). */
function start(name: string, command: string, args: string[], env: Record<string, string> = {}): Started {
  const child = spawnGroup(command, args, { cwd: ROOT, env });
  const entry: Started = { name, child, output: [] };
  const keep = (chunk: Buffer) => entry.output.push(chunk.toString());
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  started.push(entry);
  return entry;
}

export async function stopAll(): Promise<void> {
  await browser?.close().catch(() => {});
  await stopGroups(
    started.map(({ child }) => child.pid),
    5_000,
  );
  if (persistDir) rmSync(persistDir, { recursive: true, force: true });
}
// Should the run be interrupted (Ctrl-C reaches this worker, not the children's own process groups)
// or the runner go away, leave nothing behind either.
function killAllNow(): void {
  for (const { child } of started) signalGroup(child.pid, "SIGKILL");
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
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
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

/**
 * Whether the running worker serves a route (per its own OpenAPI document). The second wave's
 * routes (key rotation, usage, webhook management) are built alongside the dashboard: the tests of
 * the screens that call them skip until the worker has them, and run from then on.
 */
let served:
  | Promise<{
      paths: Record<string, Record<string, unknown>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    }>
  | undefined;
const openApi = () => (served ??= fetch(`${WORKER}/openapi.json`).then((res) => res.json() as never));
export async function routeExists(method: string, path: string): Promise<boolean> {
  return Boolean((await openApi()).paths[path]?.[method]);
}
export async function schemaHas(schema: string, property: string): Promise<boolean> {
  return Boolean((await openApi()).components.schemas[schema]?.properties?.[property]);
}

export const getProducts = (key: string) => fetch(`${WORKER}/products`, { headers: { Authorization: `Bearer ${key}` } });

export const DESKTOP = { width: 1280, height: 900 };
export const PHONE = { width: 390, height: 844 };

/**
 * Servers, the browser and screenshots (numbered in order, in test-results/`name`/) for one test file: `setUp` in its
 * beforeAll, `stopAll` in its afterAll; `openPage` and `signIn` for each test.
 */
export function browserHarness(name: string) {
  const screenshots = join(ROOT, "test-results", name);
  /** The origin of the IdP's token endpoint: not the issuer's (see setUp). */
  let tokenOrigin: string;

  let shotNumber = 0;
  async function screenshot(page: Page, shot: string): Promise<void> {
    shotNumber += 1;
    await page.screenshot({ path: join(screenshots, `${String(shotNumber).padStart(2, "0")}-${shot}.png`), fullPage: true });
  }

  /** The same state at desktop and at phone width (then back to desktop). */
  async function screenshotBoth(page: Page, shot: string): Promise<void> {
    await screenshot(page, `${shot}-desktop`);
    await page.setViewportSize(PHONE);
    await screenshot(page, `${shot}-phone`);
    await page.setViewportSize(DESKTOP);
  }

  /** A long dialog whole, at the viewport's width: made tall enough for all of it, then back. */
  async function screenshotTall(page: Page, shot: string): Promise<void> {
    const size = page.viewportSize()!;
    await page.setViewportSize({ width: size.width, height: 2_400 });
    await screenshot(page, shot);
    await page.setViewportSize(size);
  }

  async function setUp(): Promise<void> {
    for (const [port, what] of [
      [4000, "the local IdP"],
      [8787, "the worker"],
    ] as const) {
      if (await portInUse(port))
        throw new Error(`Port ${port} is taken (is \`npm run dev\` running?); this test starts ${what} there itself.`);
    }
    rmSync(screenshots, { recursive: true, force: true });
    mkdirSync(screenshots, { recursive: true });
    persistDir = mkdtempSync(join(tmpdir(), "pda-e2e-"));
    for (const binding of ["DB", "ALERTS_DB"]) {
      const migrate = spawnSync("wrangler", ["d1", "migrations", "apply", binding, "--local", "--persist-to", persistDir], {
        cwd: ROOT,
        encoding: "utf8",
        env: { ...process.env, ...WRANGLER_ENV },
      });
      if (migrate.status !== 0) throw new Error(`Migrations failed:\n${migrate.stdout}\n${migrate.stderr}`);
    }

    // The IdP's token endpoint on a second origin (the same provider on a second, free port, which its
    // discovery document names), as Cognito's and Google's are: the page must be allowed to call it.
    const idp = start("local IdP", "node", ["scripts/idp.ts"], { IDP_TOKEN_ON_SECOND_ORIGIN: "true" });
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
      "--ip",
      "127.0.0.1",
      "--port",
      "8787",
      "--persist-to",
      persistDir,
      "--show-interactive-dev-session=false",
      ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
    ]);
    await waitForHttp(`${IDP}/.well-known/openid-configuration`, idp);
    await waitForHttp(`${WORKER}/dashboard/assets/none`, worker, 90_000);
    const discovery = (await (await fetch(`${IDP}/.well-known/openid-configuration`)).json()) as { token_endpoint: string };
    tokenOrigin = new URL(discovery.token_endpoint).origin;
    expect(tokenOrigin).not.toBe(IDP);

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
  }

  let contextCount = 0;

  /** A fresh browser context and page; errors on our pages are collected, a failure is photographed. */
  async function openPage() {
    const context = await browser!.newContext({ viewport: DESKTOP });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: WORKER });
    // Each context is a client of its own (CF-Connecting-IP, as Cloudflare would set it), so the limit on
    // requests without a key (30 a minute per client) counts each test's page loads on their own.
    const clientIp = `198.51.100.${(contextCount += 1)}`;
    await context.route(`${WORKER}/**`, (route) =>
      route.continue({ headers: { ...route.request().headers(), "cf-connecting-ip": clientIp } }),
    );
    const page = await context.newPage();
    // Our pages must log no error (a CSP violation would) and get no error status from the worker.
    // (The IdP's development pages are not ours: they ask for web fonts this machine cannot reach.)
    const problems: string[] = [];
    onTestFailed(async () => {
      await screenshot(page, "failure");
      console.error(`The page at the failure: ${page.url()}\nProblems so far: ${problems.join("; ") || "none"}`);
      console.error(await page.locator("body").textContent());
    });
    page.on("console", (message) => {
      if (message.type() === "error" && page.url().startsWith(WORKER))
        problems.push(`console: ${message.text()} (${message.location().url})`);
    });
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("response", (response) => {
      if (response.url().startsWith(WORKER) && response.status() >= 400) problems.push(`${response.status()} from ${response.url()}`);
    });
    return { context, page, problems };
  }

  /** From the signed-out page through the IdP's own login page (any login and password) and back. */
  async function signIn(page: Page, photograph = false): Promise<string> {
    const landing = await page.goto(`${WORKER}/dashboard`);
    // This context's first request to the worker: a bucket of its own (see openPage), whatever ran before.
    expect(landing?.headers()["x-ratelimit-remaining"]).toBe("29");
    // The CSP lets the page call the token endpoint's origin, read from the IdP's discovery document.
    expect(landing?.headers()["content-security-policy"]).toContain(`connect-src 'self' ${IDP} ${tokenOrigin};`);
    const tokenRequests: string[] = [];
    page.on("requestfinished", (request) => {
      if (request.url().startsWith(`${tokenOrigin}/`)) tokenRequests.push(`${request.method()} ${request.url()}`);
    });
    const signInButton = page.getByRole("button", { name: "Sign in" });
    await expect.poll(() => signInButton.isVisible()).toBe(true);
    if (photograph) {
      // The local IdP's page says that any name will do (development only).
      expect(await page.locator("#signed-out").textContent()).toContain("accepts any user name");
      await screenshotBoth(page, "signed-out");
    }
    await signInButton.click();
    await page.waitForURL(`${IDP}/**`);
    const account = `e2e-${randomBytes(4).toString("hex")}`;
    await page.locator('input[name="login"]').fill(account);
    await page.locator('input[name="password"]').fill("any password");
    if (photograph) await screenshot(page, "idp-login");
    await page.locator('button[type="submit"]').click();
    await page.waitForURL(`${WORKER}/dashboard/`);
    await expect.poll(() => page.locator("#who-name").textContent()).toBe(account);
    expect(tokenRequests).toContain(`POST ${tokenOrigin}/token`); // the code was redeemed on the second origin
    return account;
  }

  return { setUp, openPage, signIn, screenshot, screenshotBoth, screenshotTall };
}

/** Creates a key in the dialog and returns the full key shown once; the dialog is left open. */
export async function createKey(page: Page, name: string, expiry?: string): Promise<string> {
  await page
    .getByRole("button", { name: /^Create (key|your first key)$/ })
    .first()
    .click();
  const dialog = page.locator("#create-key-dialog");
  await dialog.waitFor();
  await dialog.getByLabel("Name of the new key").fill(name);
  if (expiry) await dialog.getByLabel("Expires", { exact: true }).selectOption({ label: expiry });
  await dialog.getByRole("button", { name: "Create key", exact: true }).click();
  const keyField = dialog.getByLabel("Your new API key");
  await keyField.waitFor();
  return keyField.inputValue();
}

/**
 * Closes a dialog with its Done button and waits for its `close` event, which the browser fires
 * a task after the dialog hides: the page clears a shown secret in that event's handler.
 */
export async function closeDialog(page: Page, id: string): Promise<void> {
  const dialog = page.locator(`#${id}`);
  await dialog.evaluate((element) => {
    const closed = new Promise<void>((resolve) => element.addEventListener("close", () => resolve(), { once: true }));
    Object.assign(element, { closed });
  });
  await dialog.getByRole("button", { name: "Done" }).click();
  await dialog.evaluate((element) => Reflect.get(element, "closed")); // closed, so hidden too
}

/** On the Webhooks view of an account without any, adds one for `url` in the dialog; its card and the dialog. */
export async function addFirstWebhook(page: Page, url: string) {
  await page.getByRole("link", { name: "Webhooks", exact: true }).click();
  await page.getByRole("button", { name: "Add your first webhook" }).click();
  const dialog = page.locator("#webhook-dialog");
  await dialog.getByLabel("Endpoint URL").fill(url);
  await dialog.getByRole("button", { name: "Add webhook" }).click();
  await dialog.getByLabel("Signing secret").waitFor();
  await closeDialog(page, "webhook-dialog");
  return { dialog, card: page.locator("#webhooks li").first() };
}

/** Opens a card's Deliveries until they show `text` (the consumer records an attempt after making it); left open. */
export async function openDeliveriesShowing(page: Page, card: Locator, text: string): Promise<Locator> {
  const deliveries = page.locator("#deliveries-dialog");
  await expect
    .poll(
      async () => {
        await card.getByRole("button", { name: /^Deliveries/ }).click();
        await deliveries.waitFor();
        const shown = (await deliveries.textContent()) ?? "";
        if (!shown.includes(text)) await deliveries.getByRole("button", { name: "Close" }).click();
        return shown;
      },
      { timeout: 30_000, interval: 1_000 },
    )
    .toContain(text);
  return deliveries;
}

/** A webhook receiver on this machine (allowed by WEBHOOK_ALLOW_INSECURE_URLS): answers `status` (200), keeps what came. */
export async function startReceiver(status = 200) {
  const received: Array<{ headers: Record<string, string>; body: string }> = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      received.push({ headers: req.headers as Record<string, string>, body });
      res.writeHead(status).end(status === 200 ? "ok" : "gone");
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
