import { describe, expect, it } from "vitest";
import { KEY_SCOPES } from "../../src/api-keys/scopes.ts";
import { call, rateLimitOf } from "../helpers/http.ts";
import { fetchDocument, METHODS } from "../helpers/openapi.ts";

describe("GET /docs", () => {
  it("serves the reference page with a 'self'-only policy, and every asset it names from this worker", async () => {
    const res = await call("GET", "/docs");
    const html = await res.text();
    expect(res.status, html).toBe(200);
    expect(res.headers.get("Content-Type")).toMatch(/^text\/html/);
    const csp = res.headers.get("Content-Security-Policy")!;
    expect(csp).toContain("default-src 'none'");
    // Every source the policy allows is this origin (or an inline data: image), never another host.
    for (const directive of csp.split(";").map((d) => d.trim().split(/\s+/))) {
      for (const source of directive.slice(1)) expect(["'self'", "'none'", "data:"], directive.join(" ")).toContain(source);
    }
    expect(rateLimitOf(res).limit).toBe(30);

    const urls = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!).filter((url) => url.startsWith("/docs/assets/"));
    expect(urls).toHaveLength(4);
    for (const url of urls) {
      const asset = await call("GET", url);
      expect(asset.status, url).toBe(200);
      expect(asset.headers.get("Content-Type"), url).toMatch(url.endsWith(".js") ? /^text\/javascript/ : /^text\/css/);
      expect(asset.headers.get("Cache-Control")).toContain("immutable");
      expect((await asset.text()).length, url).toBeGreaterThan(50);
    }
    expect(html).toContain('href="/openapi.json"');
  });

  it("answers 404 for an asset it does not have", async () => {
    expect((await call("GET", "/docs/assets/swagger-ui-000000000000.js")).status).toBe(404);
  });
});

describe("GET /openapi.json", () => {
  it("is public, carries the rate-limit headers, and describes OpenAPI 3.1 with the three credentials and GitHub's signature", async () => {
    const res = await call("GET", "/openapi.json");
    expect(res.status).toBe(200);
    expect(rateLimitOf(res)).toMatchObject({ limit: 30, remaining: 29 });
    const doc = (await res.json()) as { openapi: string; components: { securitySchemes: Record<string, unknown> } };
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(["AccountLogin", "AdminJWT", "ApiKey", "GitHubSignature"]);
  });

  it("names the one key scope each API-key operation needs in its security requirement (a route declared without one fails here)", async () => {
    const doc = await fetchDocument();
    const keyOperations: string[] = [];
    for (const [path, item] of Object.entries<Record<string, { security: Record<string, string[]>[] }>>(doc.paths)) {
      for (const method of METHODS.filter((m) => item[m])) {
        const { security } = item[method]!;
        if (!security.some((requirement) => "ApiKey" in requirement)) continue;
        keyOperations.push(`${method} ${path}`);
        expect(security, `${method} ${path}`).toEqual([{ ApiKey: [expect.any(String)] }]);
        expect(KEY_SCOPES, `${method} ${path}`).toContain(security[0]!.ApiKey![0]);
      }
    }
    expect(keyOperations).toEqual(
      expect.arrayContaining([
        "get /competitors",
        "get /events",
        "get /events/stream",
        "get /products",
        "get /products/{id}",
        "get /products/{id}/history",
      ]),
    );
  });
});
