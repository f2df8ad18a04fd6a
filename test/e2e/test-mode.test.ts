/**
 * The dashboard's test mode in a real browser (test/e2e/harness.ts starts the IdP, `wrangler dev` and Chromium):
 * the switch, the page marked, a test key and a test webhook created, a price change sent to the sandbox through
 * POST /test/observations, its delivery at a local receiver and in the webhook's deliveries; then live again, where
 * none of it shows. Screenshots go to test-results/test-mode/ (those in docs/images/ are copies of some).
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  browserHarness,
  closeDialog,
  createKey,
  DESKTOP,
  getProducts,
  openDeliveriesShowing,
  PHONE,
  startReceiver,
  stopAll,
  WORKER,
} from "./harness.ts";

const { setUp, openPage, signIn, screenshot, screenshotBoth, screenshotTall } = browserHarness("test-mode");

/** The environment the page says it shows: the switch, the banner, the body's mark and the address agree. */
async function shownEnvironment(page: Page) {
  return {
    switchedOn: await page.getByRole("switch", { name: "Test mode" }).getAttribute("aria-checked"),
    banner: await page.locator("#test-banner").isVisible(),
    marked: await page.locator("html").getAttribute("data-environment"),
    hash: new URL(page.url()).hash,
  };
}

interface DeliveredEvent {
  type: string;
  data: { sku: string; competitor_id: string; new_price: string };
}

describe("dashboard test mode in Chromium", () => {
  afterAll(stopAll, 30_000);
  beforeAll(setUp);

  it("switches to test mode, creates a test key and webhook, sends a price change that fires it; live shows none of it", async () => {
    const receiver = await startReceiver();
    try {
      const { context, page, problems } = await openPage();
      await signIn(page);

      // Live first: a live key, which test mode must not list, used once; it never reads the sandbox.
      const liveKey = await createKey(page, "Live server");
      expect(liveKey).toMatch(/^pda_live_/);
      await closeDialog(page, "create-key-dialog");
      const live = (await (await getProducts(liveKey)).json()) as { products: Array<{ sku: string }> };
      expect(live.products.some((product) => product.sku.startsWith("TEST-"))).toBe(false);
      // The test key's requests from the page (the dialog's look-ups and its change), to find in the usage.
      let testKeyRequests = 0;
      page.on("request", (request) => {
        if (request.headers().authorization?.startsWith("Bearer pda_test_")) testKeyRequests += 1;
      });
      const toggle = page.getByRole("switch", { name: "Test mode" });
      expect(await shownEnvironment(page)).toMatchObject({ switchedOn: "false", banner: false, marked: "live" });
      await screenshotBoth(page, "live-with-switch");

      // The switch: the same view in test mode, marked, with the focus still on the switch.
      await toggle.click();
      await expect.poll(() => shownEnvironment(page)).toEqual({ switchedOn: "true", banner: true, marked: "test", hash: "#test/keys" });
      expect(await page.evaluate("document.activeElement.id")).toBe("environment-switch");
      expect(await page.locator("#keys-title").textContent()).toBe("API keys · test mode");
      expect(await page.title()).toBe("Test mode · API keys · Price Data API");
      expect(await page.locator("#plan").textContent()).toContain("each test key (standard limits): 60 requests a minute");
      await expect.poll(() => page.locator("#keys").textContent()).toContain("No test keys yet");
      expect(await page.locator("#keys").textContent()).not.toContain("Live server");
      await screenshotBoth(page, "test-mode-keys-empty");

      // A test key: shown once, reads the sandbox only.
      const testKey = await createKey(page, "Sandbox script");
      expect(testKey).toMatch(/^pda_test_[0-9A-Za-z]{46}$/);
      expect(await page.locator("#create-key-title").textContent()).toBe("Create a test key");
      await closeDialog(page, "create-key-dialog");
      await expect.poll(() => page.locator("#keys").textContent()).toContain("Sandbox script");
      expect(await page.locator("#keys .prefix").first().textContent()).toMatch(/^pda_test_/);
      await screenshotBoth(page, "test-mode-keys");
      const sandbox = (await (await getProducts(testKey)).json()) as { products: Array<{ sku: string }> };
      expect(sandbox.products.length).toBeGreaterThan(0);
      expect(sandbox.products.every((product) => product.sku.startsWith("TEST-"))).toBe(true);

      // A test webhook at a receiver on this machine.
      await page.getByRole("link", { name: "Webhooks", exact: true }).click();
      await expect.poll(() => new URL(page.url()).hash).toBe("#test/webhooks");
      await page.getByRole("button", { name: "Add your first test webhook" }).click();
      const webhookDialog = page.locator("#webhook-dialog");
      expect(await webhookDialog.locator("h2").textContent()).toBe("Add a test webhook");
      await webhookDialog.getByLabel("Endpoint URL").fill(receiver.url);
      await webhookDialog.getByRole("button", { name: "Add webhook" }).click();
      await webhookDialog.getByLabel("Signing secret").waitFor();
      await closeDialog(page, "webhook-dialog");
      const card = page.locator("#webhooks li", { hasText: receiver.url });
      await card.waitFor();

      // Send a price change with the test key the page holds: the product is looked up, its first offer suggested.
      await page.getByRole("button", { name: "Send a price change" }).click();
      const send = page.locator("#send-change-dialog");
      await send.waitFor();
      expect(await send.getByLabel("Send with").locator("option:checked").textContent()).toContain("Sandbox script");
      await expect.poll(() => send.getByLabel("Offer to change").locator("option").count()).toBeGreaterThan(0);
      const sku = await send.getByLabel("Product (SKU)").inputValue();
      const competitor = await send.getByLabel("Offer to change").inputValue();
      const newPrice = await send.getByLabel("New price").inputValue();
      expect(sku).toMatch(/^TEST-/);
      expect(newPrice).toMatch(/^\d+(\.\d+)?$/);
      await screenshot(page, "send-price-change-dialog-desktop");
      await page.setViewportSize(PHONE);
      await screenshotTall(page, "send-price-change-dialog-phone"); // the whole dialog, which scrolls on a phone
      await page.setViewportSize(DESKTOP);
      await send.getByRole("button", { name: "Send price change" }).click();
      await expect.poll(() => send.locator(".feedback").textContent(), { timeout: 30_000 }).toContain("Sent (");

      // The receiver gets the sandbox's event, and the webhook's deliveries list it.
      await expect.poll(() => receiver.received.length, { timeout: 30_000 }).toBeGreaterThan(0);
      const event = JSON.parse(receiver.received[0]!.body) as DeliveredEvent;
      expect(event).toMatchObject({ type: "price.changed", data: { sku, competitor_id: competitor } });
      expect(Number(event.data.new_price)).toBe(Number(newPrice));
      await send.getByRole("button", { name: "Close" }).click();
      const deliveries = await openDeliveriesShowing(page, card, "price.changed");
      expect(await deliveries.textContent()).toContain("HTTP 200");
      await deliveries.getByText("Body sent").click();
      expect(await deliveries.locator("pre").first().textContent()).toContain(sku);
      await screenshotBoth(page, "test-webhook-delivery");
      await deliveries.getByRole("button", { name: "Close" }).click();
      // The card's health has caught up with the delivery the dialog showed.
      await expect.poll(() => card.locator(".health").textContent()).toContain("HTTP 200");

      // The usage of test keys only: this one's requests (one from here, the rest from the dialog); no live key offered.
      await page.getByRole("link", { name: "Usage", exact: true }).click();
      expect(testKeyRequests).toBeGreaterThanOrEqual(3); // the look-up on opening, the change, the look-up after it
      const chart = page.locator("#usage figure");
      await expect.poll(() => chart.locator("h2").textContent()).toContain("All test keys");
      expect(await chart.locator(".chart-totals").textContent()).toMatch(new RegExp(`^${1 + testKeyRequests} admitted`));
      const offeredInTest = await page.getByLabel("Key", { exact: true }).locator("option").allTextContents();
      expect(offeredInTest.some((option) => option.includes("Sandbox script"))).toBe(true);
      expect(offeredInTest.some((option) => option.includes("Live server"))).toBe(false);
      await screenshotBoth(page, "test-mode-usage");
      await page.getByRole("link", { name: "Webhooks", exact: true }).click();

      // A reload keeps test mode (the address says it).
      await page.reload();
      await page.waitForURL(`${WORKER}/dashboard/**`);
      await expect.poll(() => shownEnvironment(page)).toEqual({ switchedOn: "true", banner: true, marked: "test", hash: "#test/webhooks" });
      await card.waitFor();

      // Back to live, from the keyboard: none of it shows.
      await toggle.focus();
      await page.keyboard.press("Space");
      await expect.poll(() => shownEnvironment(page)).toEqual({ switchedOn: "false", banner: false, marked: "live", hash: "#webhooks" });
      await expect.poll(() => page.locator("#webhooks").textContent()).toContain("No webhooks yet");
      await page.getByRole("link", { name: "Keys", exact: true }).click();
      await expect.poll(() => page.locator("#keys").textContent()).toContain("Live server");
      expect(await page.locator("#keys").textContent()).not.toContain("Sandbox script");
      await page.getByRole("link", { name: "Usage", exact: true }).click();
      await expect.poll(() => chart.locator("h2").textContent()).toContain("All keys");
      expect(await chart.locator(".chart-totals").textContent()).toMatch(/^1 admitted/); // the live key's one request
      const offered = await page.getByLabel("Key", { exact: true }).locator("option").allTextContents();
      expect(offered.some((option) => option.includes("Live server"))).toBe(true);
      expect(offered.some((option) => option.includes("Sandbox script"))).toBe(false);
      await screenshotBoth(page, "live-again");

      // The choice is remembered per browser: a new tab of this browser, at the bare address, opens in test mode.
      await toggle.click();
      await expect.poll(() => shownEnvironment(page)).toMatchObject({ marked: "test", hash: "#test/usage" });
      const second = await context.newPage();
      await second.goto(`${WORKER}/dashboard`);
      await second.getByRole("button", { name: "Sign in" }).click(); // the IdP's session is still open: no login page
      await second.waitForURL(`${WORKER}/dashboard/**`);
      await expect.poll(() => shownEnvironment(second)).toEqual({ switchedOn: "true", banner: true, marked: "test", hash: "#test/keys" });
      await second.setViewportSize(PHONE);
      await screenshot(second, "new-tab-remembers-test-mode-phone");
      await second.setViewportSize(DESKTOP);

      // The test key's secret stayed in the first page's memory: this page holds none (nor does any storage), so
      // the dialog offers to paste one or create one, and a key created there is used at once.
      for (const storage of ["localStorage", "sessionStorage"])
        expect(await second.evaluate(`JSON.stringify(Object.values(${storage}))`)).not.toContain("pda_test_");
      await second.getByRole("button", { name: "Send a price change" }).click();
      const secondSend = second.locator("#send-change-dialog");
      expect(await secondSend.getByLabel("Send with").locator("option").allTextContents()).toEqual(["A test key I paste"]);
      expect(await secondSend.getByLabel("Paste a test key").isVisible()).toBe(true);
      await secondSend.getByRole("button", { name: "Create a test key for this" }).click();
      await expect.poll(() => secondSend.getByLabel("Offer to change").locator("option").count()).toBeGreaterThan(0);
      expect(await secondSend.getByLabel("Send with").locator("option:checked").textContent()).toMatch(
        /^Dashboard: send a price change \(pda_test_/,
      );
      expect(await secondSend.getByLabel("Paste a test key").isVisible()).toBe(false);
      await secondSend.getByRole("button", { name: "Close" }).click();
      await expect.poll(() => second.locator("#keys").textContent()).toContain("Dashboard: send a price change");

      // Activity in test mode is about test keys and webhooks only: nothing has happened to them.
      await second.getByRole("link", { name: "Activity", exact: true }).click();
      await expect.poll(() => second.locator("#activity").textContent()).toContain("Nothing to report about your test keys and webhooks");

      expect(problems).toEqual([]);
      await context.close();
    } finally {
      await receiver.close();
    }
  });
});
