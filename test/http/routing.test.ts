import { describe, expect, it } from "vitest";
import type { ApiError } from "../../client/index.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { accountToken } from "../helpers/tokens.ts";

function expectRequestId(res: Response): string {
  const id = res.headers.get("X-Request-Id");
  expect(id, `X-Request-Id on a ${res.status}`).toBeTruthy();
  return id!;
}

describe("request ids, unknown routes and methods", () => {
  it("every response carries a distinct X-Request-Id", async () => {
    const token = await accountToken("ids");
    const responses = [
      await call("GET", "/account", { token }),
      await call("GET", "/api-keys"),
      await call("GET", "/no-such-route"),
      await call("PUT", "/api-keys", { token }),
      await call("POST", "/api-keys", { token, body: "not json" }),
    ];
    expect(responses.map((res) => res.status)).toEqual([200, 401, 404, 405, 400]);
    const ids = responses.map(expectRequestId);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("a query parameter without a name (?=x) is refused on every route, and an unknown one where the route takes none", async () => {
    const { token, key } = await freshAccount({ sub: "nameless-query" });
    // Each with the credential its route takes: a login on a data route is 401 before its query is read.
    for (const [path, credential] of [
      ["/account?=x", token],
      ["/api-keys?a=1&=2", token],
      ["/webhooks?=", token],
      ["/products?=x", key],
    ]) {
      const body = await expectJson<ApiError>(await call("GET", path!, { token: credential }), 400);
      expect(body.detail).toMatch(/no name/);
    }
    for (const path of ["/account?verbose=1", "/api-keys?status=active"]) {
      expect((await expectJson<ApiError>(await call("GET", path, { token }), 400)).detail).toMatch(/unknown query parameter/);
    }
  });

  it("GET / is a JSON index of where to go", async () => {
    const res = await call("GET", "/");
    const body = await expectJson<{ links: Record<string, string>; routes: { path: string; access: string }[] }>(res, 200);
    expect(body.links).toMatchObject({
      products: "/products",
      events: "/events",
      dashboard: "/dashboard",
      reference: "/docs",
      openapi: "/openapi.json",
    });
    // Built from the app's route table: every prefix a request can reach is listed with who may call it.
    const listed = body.routes.map((route) => route.path);
    expect(listed).toEqual(expect.arrayContaining(["/events", "/events/stream", "/mcp", "/admin/observations", "/secret-scanning"]));
    expectRequestId(res);
  });

  it("an unknown route is a 404 with a JSON detail, with or without a token", async () => {
    for (const [method, path, token] of [
      ["GET", "/no-such-route", undefined],
      ["POST", "/no-such-route", await accountToken("lost")],
      ["GET", "/accounts", undefined],
      ["GET", "/admin/accounts/x", undefined],
    ] as [string, string, string | undefined][]) {
      const res = await call(method, path, { token });
      const body = await expectJson<ApiError>(res, 404);
      expect(body).toEqual({ detail: expect.any(String) });
      expect(body.detail).toContain(path);
      // Where to look, on the API itself: a deployed API's caller has no README.
      expect(body.detail).toMatch(/GET \/ lists the routes, and GET \/openapi\.json/);
      expect(body.detail).not.toMatch(/README/);
      expect(res.headers.get("Content-Type")).toMatch(/^application\/json/);
      expectRequestId(res);
    }
  });

  it("PUT /api-keys is 405 with an Allow header listing the methods that exist", async () => {
    const res = await call("PUT", "/api-keys", { token: await accountToken("wrong-method") });
    const body = await expectJson(res, 405);
    expect(body).toEqual({ detail: expect.any(String) });
    expectRequestId(res);
    const allow = (res.headers.get("Allow") ?? "").split(",").map((m) => m.trim());
    expect(allow).toEqual(expect.arrayContaining(["GET", "POST"]));
    expect(allow).not.toContain("PUT");
  });

  it("GET /api-keys/:id is 405 with Allow: PATCH, DELETE", async () => {
    const res = await call("GET", "/api-keys/key_abc", { token: await accountToken("wrong-method-2") });
    await expectJson(res, 405);
    const allow = (res.headers.get("Allow") ?? "").split(",").map((m) => m.trim());
    expect(allow.sort()).toEqual(["DELETE", "PATCH"]);
  });

  it("POST /account is 405 with Allow including GET", async () => {
    const res = await call("POST", "/account", { token: await accountToken("wrong-method-3"), body: {} });
    await expectJson(res, 405);
    expect(res.headers.get("Allow")).toContain("GET");
  });
});
