/**
 * One-click connect's consent in a real browser (test/e2e/harness.ts starts the IdP, `wrangler dev` and Chromium): an
 * AI client registers and sends its user's browser to /oauth/authorize; the dashboard, signed in through the local IdP,
 * asks; the user unticks a scope and allows; the browser lands at the client's loopback redirect with a code, which the
 * client redeems (S256 PKCE) for a token that reads /mcp; the key list then shows the connector. Screenshots go to
 * test-results/connect/.
 */
import { createHash, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { browserHarness, stopAll, WORKER } from "./harness.ts";

const { setUp, openPage, signIn, screenshotBoth } = browserHarness("connect");

/** A native client's loopback redirect: nothing listens there; the browser's arrival is caught by the test. */
const REDIRECT = "http://127.0.0.1:33418/callback";

describe("one-click connect in Chromium", () => {
  afterAll(stopAll, 30_000);
  beforeAll(setUp);

  it("asks the signed-in account holder, sends the code back to the client, and the grant reads /mcp as a connector key", async () => {
    const { page, problems } = await openPage();
    await signIn(page);

    // The client: registered, its PKCE pair, its authorisation request (as the MCP SDK builds it).
    const registered = await fetch(`${WORKER}/oauth/register`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ client_name: "E2E agent", redirect_uris: [REDIRECT], token_endpoint_auth_method: "none" }),
    });
    expect(registered.status).toBe(201);
    const { client_id: clientId } = (await registered.json()) as { client_id: string };
    const verifier = randomBytes(32).toString("base64url");
    const state = randomBytes(8).toString("hex");
    const authorize = new URL(`${WORKER}/oauth/authorize`);
    authorize.search = new URLSearchParams({
      response_type: "code",
      client_id: clientId,
      redirect_uri: REDIRECT,
      code_challenge: createHash("sha256").update(verifier).digest("base64url"),
      code_challenge_method: "S256",
      state,
      scope: "products:read history:read",
      resource: `${WORKER}/mcp`,
    }).toString();

    let arrived: URL | undefined;
    await page.context().route(`${REDIRECT}**`, async (route) => {
      arrived = new URL(route.request().url());
      await route.fulfill({ status: 200, contentType: "text/plain", body: "Connected; you can close this tab." });
    });
    await page.goto(authorize.toString());
    // The dashboard signs in again silently (the IdP's session), then asks.
    const dialog = page.getByRole("dialog", { name: "Connect an AI client?" });
    await expect.poll(() => dialog.isVisible()).toBe(true);
    const text = await dialog.textContent();
    expect(text).toContain("“E2E agent”");
    expect(text).toContain("127.0.0.1");
    expect(text).toContain("an app on this computer");
    expect(await dialog.getByRole("checkbox", { name: /Products and competitors/ }).isChecked()).toBe(true);
    expect(await dialog.getByRole("checkbox", { name: /Events feed and stream/ }).isChecked()).toBe(false);
    await screenshotBoth(page, "consent");
    await dialog.getByRole("checkbox", { name: /Price history/ }).uncheck();
    await dialog.getByRole("button", { name: "Allow" }).click();

    await expect.poll(() => arrived?.searchParams.get("state")).toBe(state);
    const code = arrived!.searchParams.get("code")!;
    const redeemed = await fetch(`${WORKER}/oauth/token`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code,
        redirect_uri: REDIRECT,
        client_id: clientId,
        code_verifier: verifier,
        resource: `${WORKER}/mcp`,
      }).toString(),
    });
    expect(redeemed.status).toBe(200);
    const tokens = (await redeemed.json()) as { access_token: string; scope: string };
    expect(tokens.scope).toBe("products:read");
    const tools = await fetch(`${WORKER}/mcp`, {
      method: "POST",
      headers: {
        Authorization: `Bearer ${tokens.access_token}`,
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(tools.status).toBe(200);

    // Back on the dashboard: the connector in the key list, with no Rotate.
    await page.goto(`${WORKER}/dashboard/#keys`);
    const row = page.locator("tr.key", { hasText: "E2E agent" });
    await expect.poll(() => row.isVisible()).toBe(true);
    expect(await row.textContent()).toContain("Connector");
    expect(await row.getByRole("button", { name: /^Rotate/ }).count()).toBe(0);
    await screenshotBoth(page, "connector-key");
    expect(problems).toEqual([]);
  });
});
