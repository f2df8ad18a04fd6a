import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { ApiError } from "../../client/index.ts";
import { buildApp } from "../../src/app.ts";
import { randomTestIp, rateLimitOf } from "../helpers/http.ts";
import { captureLogs } from "../helpers/logs.ts";

const app = buildApp();

/** The worker with the dashboard's client id set (the tests' config leaves it out, as a deploy might). */
async function dashboardCall(method: string, path: string, vars: Partial<Env> = { DASHBOARD_CLIENT_ID: "dashboard-client" }) {
  const ctx = createExecutionContext();
  const res = await app.fetch(
    new Request(`https://api.test${path}`, { method, headers: { "CF-Connecting-IP": randomTestIp() } }),
    { ...env, ...vars },
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return res;
}

/**
 * The IdPs' discovery documents (outside this machine, so answered here): the tests' issuer keeps its
 * token endpoint on another origin, as Cognito and Google do; "down.idp.test" cannot be read.
 */
const TOKEN_ORIGIN = "https://tokens.idp-elsewhere.test";
const discoveryReads: string[] = [];
beforeAll(() => {
  const realFetch = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const url = new Request(input, init).url;
    if (url === `${new URL(env.IDP_ISSUER!).origin}/.well-known/openid-configuration`) {
      discoveryReads.push(url);
      return Response.json({
        issuer: env.IDP_ISSUER,
        authorization_endpoint: `${env.IDP_ISSUER}authorize`,
        token_endpoint: `${TOKEN_ORIGIN}/oauth2/token`,
      });
    }
    if (url.startsWith("https://down.idp.test/")) return new Response("unavailable", { status: 503 });
    return realFetch(input, init);
  });
});
afterAll(() => vi.restoreAllMocks());

describe("dashboard routes", () => {
  it("serves the page at /dashboard, /dashboard/ and /dashboard/callback, with a strict CSP and the rate-limit headers", async () => {
    for (const path of ["/dashboard", "/dashboard/", "/dashboard/callback?code=abc&state=def"]) {
      const res = await dashboardCall("GET", path);
      const html = await res.text();
      expect(res.status, html).toBe(200);
      expect(res.headers.get("Content-Type")).toMatch(/^text\/html/);
      expect(html).toContain('data-client-id="dashboard-client"');
      expect(html).toContain(`data-issuer="${env.IDP_ISSUER}"`);
      const csp = res.headers.get("Content-Security-Policy") ?? "";
      expect(csp).toContain("script-src 'self'");
      // The page calls the IdP's discovery (the issuer's origin) and its token endpoint (another origin here).
      expect(csp).toContain(`connect-src 'self' ${new URL(env.IDP_ISSUER!).origin} ${TOKEN_ORIGIN};`);
      expect(csp).toContain("frame-ancestors 'none'");
      expect(res.headers.get("Cache-Control")).toBe("no-store");
      expect(res.headers.get("Referrer-Policy")).toBe("no-referrer");
      // Counted like any request without a credential: in the client IP's bucket.
      expect(rateLimitOf(res)).toMatchObject({ limit: 30, remaining: 29 });
    }
  });

  it("reads the discovery document once for many page loads; one it cannot read leaves the issuer's origin alone, and the page still serves", async () => {
    const before = discoveryReads.length;
    await Promise.all(Array.from({ length: 5 }, () => dashboardCall("GET", "/dashboard")));
    expect(discoveryReads.length - before).toBeLessThanOrEqual(1);

    const logs = captureLogs();
    const res = await dashboardCall("GET", "/dashboard", { DASHBOARD_CLIENT_ID: "dashboard-client", IDP_ISSUER: "https://down.idp.test/" });
    expect(res.status).toBe(200);
    expect(logs).toEqual([expect.objectContaining({ level: "warn", source: "dashboard", message: "IdP discovery document unreadable" })]);
    const connect = /connect-src ([^;]*)/.exec(res.headers.get("Content-Security-Policy") ?? "")?.[1];
    expect(connect).toBe("'self' https://down.idp.test");
  });

  it("escapes the configuration it writes into the page", async () => {
    const res = await dashboardCall("GET", "/dashboard", { DASHBOARD_CLIENT_ID: `a"><script>alert(1)</script>` });
    const html = await res.text();
    expect(html).not.toContain("<script>alert(1)");
    expect(html).toContain('data-client-id="a&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"');
  });

  it("serves the bundled script and styles under content-hashed names, cacheable for good", async () => {
    const html = await (await dashboardCall("GET", "/dashboard")).text();
    const script = /<script type="module" src="([^"]+)"/.exec(html)?.[1];
    const styles = /<link rel="stylesheet" href="([^"]+)"/.exec(html)?.[1];
    expect(script).toMatch(/^\/dashboard\/assets\/app-[0-9a-f]{12}\.js$/);
    expect(styles).toMatch(/^\/dashboard\/assets\/app-[0-9a-f]{12}\.css$/);
    for (const [path, type] of [
      [script!, "text/javascript"],
      [styles!, "text/css"],
    ] as const) {
      const res = await dashboardCall("GET", path);
      const body = await res.text();
      expect(res.status, body).toBe(200);
      expect(res.headers.get("Content-Type")).toContain(type);
      expect(res.headers.get("Cache-Control")).toContain("immutable");
      expect(res.headers.get("X-RateLimit-Limit")).toBe("30");
      expect(body.length).toBeGreaterThan(100);
    }
    const missing = await dashboardCall("GET", "/dashboard/assets/app-000000000000.js");
    expect(missing.status).toBe(404);
    expect(await missing.json()).toHaveProperty("detail");
  });

  it("without DASHBOARD_CLIENT_ID answers /dashboard with an error naming it, and the API still serves", async () => {
    for (const value of [undefined, "", " "]) {
      const vars = { DASHBOARD_CLIENT_ID: value };
      const res = await dashboardCall("GET", "/dashboard", vars);
      const body = await res.json<ApiError>();
      expect(res.status, JSON.stringify(body)).toBe(500);
      expect(body.detail).toContain("DASHBOARD_CLIENT_ID");
      expect(res.headers.get("X-RateLimit-Limit")).toBe("30");
      const products = await dashboardCall("GET", "/products", vars);
      expect(products.status, await products.text()).toBe(401);
    }
  });

  it("allows only GET", async () => {
    const res = await dashboardCall("POST", "/dashboard");
    expect(res.status).toBe(405);
    expect(res.headers.get("Allow")).toBe("GET, HEAD");
  });
});
