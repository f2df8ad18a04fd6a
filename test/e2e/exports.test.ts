/**
 * The dashboard's Exports view in a real browser (test/e2e/harness.ts starts the IdP, `wrangler dev` and Chromium):
 * in test mode, a catalogue export as NDJSON started from the dialog, its progress followed until it is done, its
 * download link fetched without signing in (the sandbox's products, one JSON line each); a scheduled changes export;
 * the API's 400 about a destination field shown under that field; live mode lists none of the test exports.
 * Screenshots go to test-results/exports/ (those in docs/images/exports-*.png are copies of some).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { browserHarness, DESKTOP, PHONE, stopAll, WORKER } from "./harness.ts";

const { setUp, openPage, signIn, screenshotBoth, screenshotTall } = browserHarness("exports");

/**
 * An S3-compatible bucket's stand-in on this machine (the customer's is beyond it; the worker's SigV4 signing is
 * lake.test.ts's business): refuses each upload (503) until `accept`, then keeps what it is sent.
 */
async function startBucket() {
  let accepting = false;
  const state = { refused: 0, stored: [] as Array<{ path: string; body: string }> };
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      if (!accepting) {
        state.refused += 1;
        res.writeHead(503).end("<Error><Code>SlowDown</Code></Error>");
        return;
      }
      state.stored.push({ path: req.url ?? "", body });
      res.writeHead(200, { ETag: '"e2e"' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    get refused() {
      return state.refused;
    },
    stored: state.stored,
    accept: () => {
      accepting = true;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("dashboard exports in Chromium", () => {
  afterAll(stopAll, 30_000);
  beforeAll(setUp);

  it("starts a catalogue NDJSON export of the sandbox, follows it to its end, downloads it; schedules a changes export", async () => {
    const { context, page, problems } = await openPage();
    await signIn(page);

    await page.getByRole("link", { name: "Exports", exact: true }).click();
    await expect.poll(() => new URL(page.url()).hash).toBe("#exports");
    await expect.poll(() => page.title()).toBe("Exports · Price Data API");
    await expect.poll(() => page.locator("#exports").textContent()).toContain("No exports yet.");

    // Test mode: the sandbox's exports.
    await page.getByRole("switch", { name: "Test mode" }).click();
    await expect.poll(() => new URL(page.url()).hash).toBe("#test/exports");
    await expect.poll(() => page.locator("#exports").textContent()).toContain("No test exports yet.");
    await screenshotBoth(page, "exports-empty");

    // The catalogue as NDJSON, by keyboard: the dialog opens on the kind, the format is a radio group.
    await page.getByRole("button", { name: "Start your first test export" }).click();
    const dialog = page.locator("#export-dialog");
    await dialog.waitFor();
    expect(await dialog.locator("h2").textContent()).toBe("New test export");
    expect(await page.evaluate("document.activeElement.value")).toBe("catalogue");
    expect(await dialog.getByLabel("From", { exact: true }).isVisible()).toBe(false); // no span for the catalogue
    await dialog.getByLabel("NDJSON").check();
    await dialog.getByRole("button", { name: "Start export" }).click();
    await expect.poll(() => dialog.isVisible()).toBe(false);

    const card = page.locator("#exports li.card").first();
    await expect.poll(() => card.locator("h3").textContent()).toBe("Catalogue · NDJSON");
    // The page reads GET /exports/{id} every few seconds while it runs, until it is done (no reload). The sandbox's
    // catalogue is one step, which here ends before the page lists it: the running state is seldom seen.
    await expect.poll(() => card.locator(".badge").textContent(), { timeout: 60_000, interval: 500 }).toBe("Done");
    const rows = Number((await card.locator("dt:text-is('Rows') + dd").textContent())!.replace(/\D/g, ""));
    expect(rows).toBeGreaterThan(0);
    // Its links are drawn as it ends; one that ended before the first look offers them on a button.
    const downloadLinks = card.getByRole("button", { name: /^Download links/ });
    if (await downloadLinks.isVisible()) await downloadLinks.click();
    const link = card.locator(".file-list a").first();
    await link.waitFor();
    expect(await link.textContent()).toMatch(/^date=\d{4}-\d{2}-\d{2}\/part-00000\.ndjson$/);
    expect(await card.locator(".file-list").textContent()).toContain("_manifest.json");
    await screenshotBoth(page, "exports-done");

    // The signed link needs no sign-in: the bytes are the sandbox's products, one JSON line each.
    const href = (await link.getAttribute("href"))!;
    expect(href.startsWith(`${WORKER}/exports/`)).toBe(true);
    const download = await fetch(href);
    expect(download.status).toBe(200);
    const lines = (await download.text()).trim().split("\n");
    const products = lines.map((line) => JSON.parse(line) as { sku: string });
    expect(products.length).toBe(rows); // one file holds the sandbox's catalogue
    expect(products.every((row) => row.sku.startsWith("TEST-"))).toBe(true);

    // A destination field the API refuses: its detail under that field, in the form's words.
    await page.getByRole("button", { name: "New export" }).click();
    await dialog.waitFor();
    await dialog.getByText("Your own S3-compatible bucket").click();
    await dialog.getByLabel("Endpoint").fill("https://s3.eu-west-1.amazonaws.com");
    await dialog.getByLabel("Bucket", { exact: true }).fill("Not_A_Bucket");
    await dialog.getByLabel("Region").fill("eu-west-1");
    await dialog.getByLabel("Access key id").fill("AKIAEXAMPLE");
    await dialog.getByLabel("Secret access key").fill("example-secret");
    expect(await dialog.textContent()).toContain("never shown again");
    await dialog.getByRole("button", { name: "Start export" }).click();
    const bucketError = page.locator("#export-bucket-error");
    await bucketError.waitFor();
    expect(await bucketError.textContent()).toMatch(/^Bucket: must be an S3 bucket name/);
    expect(await page.locator("#export-bucket").getAttribute("aria-invalid")).toBe("true");
    expect(await page.evaluate("document.activeElement.id")).toBe("export-bucket");
    await screenshotTall(page, "exports-field-error");
    await dialog.getByRole("button", { name: "Cancel" }).click();
    // The secret went with the dialog.
    await expect.poll(() => page.locator("#export-secret").inputValue()).toBe(""); // (the close event comes a task later)

    // To the customer's bucket: a stand-in on this machine (the real one is beyond it) refuses the first upload, so
    // the export runs on, retrying, while the page follows it every few seconds; then it takes them and the export ends.
    const bucket = await startBucket();
    try {
      await page.getByRole("button", { name: "New export" }).click();
      await dialog.getByLabel("NDJSON").check();
      await dialog.getByText("Your own S3-compatible bucket").click();
      await dialog.getByLabel("Endpoint").fill(bucket.endpoint);
      await dialog.getByLabel("Bucket", { exact: true }).fill("acme-lake");
      await dialog.getByLabel("Region").fill("auto");
      await dialog.getByLabel("Prefix (optional)").fill("prices/");
      await dialog.getByLabel("Access key id").fill("AKIAE2EEXAMPLE");
      await dialog.getByLabel("Secret access key").fill("e2e-secret-example");
      await dialog.getByRole("button", { name: "Start export" }).click();
      const own = page.locator("#exports li.card", { hasText: "s3://acme-lake/prices/" });
      await expect
        .poll(() => own.locator(".reason").textContent(), { timeout: 30_000 })
        .toMatch(/^Trying again after an error: The bucket answered 503 to the upload of date=/);
      expect(await own.locator(".badge").textContent()).toBe("Running");
      expect(await own.locator("progress").count()).toBe(1);
      await screenshotBoth(page, "exports-running");
      const polls = bucket.refused;
      bucket.accept();
      await expect.poll(() => own.locator(".badge").textContent(), { timeout: 60_000, interval: 500 }).toBe("Done");
      expect(polls).toBeGreaterThan(0);
      await expect.poll(() => page.locator("#announcer").textContent()).toMatch(/^Catalogue · NDJSON export done: [\d,]+ rows\.$/);
      expect(await own.locator(".reason").count()).toBe(0);
      expect(await own.locator("a").count()).toBe(0); // its files are in the customer's bucket: no links of ours
      const paths = bucket.stored.map(({ path }) => decodeURIComponent(path)); // (SigV4 encodes the "=")
      expect(paths).toContainEqual(expect.stringMatching(/^\/acme-lake\/prices\/exp_[0-9a-f]+\/date=[\d-]+\/part-00000\.ndjson$/));
      const part = bucket.stored.find(({ path }) => path.endsWith("/part-00000.ndjson"));
      const written = part!.body
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { sku: string });
      expect(written.length).toBe(rows); // the same sandbox catalogue as the download above
      expect(written.every((row) => row.sku.startsWith("TEST-"))).toBe(true);
      expect(bucket.stored.some(({ path }) => path.endsWith("/_manifest.json"))).toBe(true);
    } finally {
      await bucket.close();
    }

    // The changes of the last day, then each closed hour.
    await page.getByRole("button", { name: "New export" }).click();
    await dialog.getByLabel("Changes", { exact: true }).check();
    expect(await dialog.getByLabel("From", { exact: true }).inputValue()).not.toBe("");
    await dialog.getByLabel("Keep appending").selectOption("hourly");
    await screenshotBoth(page, "exports-new-changes");
    await dialog.getByRole("button", { name: "Start export" }).click();
    await expect.poll(() => dialog.isVisible()).toBe(false);
    const scheduled = page.locator("#exports li.card", { hasText: "Changes · Parquet" });
    await expect.poll(() => scheduled.locator(".badge").textContent(), { timeout: 60_000, interval: 500 }).toBe("Scheduled");
    expect(await scheduled.locator("dt:text-is('Schedule') + dd").textContent()).toBe("Hourly");
    expect(await page.locator("#exports li.card").count()).toBe(3);
    await screenshotBoth(page, "exports-list");
    // Five tabs and the cards fit a phone's width: nothing is wider than the screen.
    await page.setViewportSize(PHONE);
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(PHONE.width);
    await page.setViewportSize(DESKTOP);

    // Live lists none of the sandbox's exports.
    await page.getByRole("switch", { name: "Test mode" }).click();
    await expect.poll(() => new URL(page.url()).hash).toBe("#exports");
    await expect.poll(() => page.locator("#exports").textContent()).toContain("No exports yet.");

    // The one refusal was the bucket's name, on purpose.
    // (Chromium logs the refused request as a console error too.)
    expect(problems.filter((problem) => !problem.includes("400"))).toEqual([]);
    expect(problems).toContain(`400 from ${WORKER}/exports`);
    await context.close();
  }, 240_000);
});
