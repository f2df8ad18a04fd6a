// The dashboard's API client (browser code with no DOM use, so it runs here too): errors as people read them.
import { afterEach, describe, expect, it, vi } from "vitest";
import { ApiFailure, api, apiWithKey, duration, useAccessToken } from "../../src/dashboard/browser/api.ts";

function answer(status: number, body: unknown, headers: Record<string, string> = {}) {
  const fetchMock = vi.fn(
    async () => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } }),
  );
  vi.stubGlobal("fetch", fetchMock);
  return fetchMock;
}

async function failure(promise: Promise<unknown>): Promise<ApiFailure> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiFailure);
  return error as ApiFailure;
}

describe("dashboard API client", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    useAccessToken(undefined);
  });

  it("sends the in-memory token and JSON, and returns the parsed body", async () => {
    useAccessToken("token-1");
    const fetchMock = answer(201, { id: "key_1" });
    expect(await api("POST", "/api-keys", { name: "x" })).toEqual({ id: "key_1" });
    const [path, init] = fetchMock.mock.calls[0] as unknown as [string, RequestInit];
    expect(path).toBe("/api-keys");
    expect(new Headers(init.headers).get("Authorization")).toBe("Bearer token-1");
    expect(init.body).toBe('{"name":"x"}');
  });

  it("shows the API's detail", async () => {
    useAccessToken("token-1");
    answer(409, { detail: "This account already has 100 active keys; revoke one first." });
    expect((await failure(api("POST", "/api-keys", { name: "x" }))).message).toBe(
      "This account already has 100 active keys; revoke one first.",
    );
  });

  it("says how long to wait after a 429, from Retry-After", async () => {
    useAccessToken("token-1");
    answer(429, { detail: "Rate limit exceeded: 60 requests per minute." }, { "Retry-After": "45" });
    const error = await failure(api("GET", "/api-keys"));
    expect(error.status).toBe(429);
    expect(error.message).toBe("Rate limit exceeded: 60 requests per minute. Wait 45 seconds before trying again.");
    answer(429, {}, {});
    expect((await failure(api("GET", "/api-keys"))).message).toBe("Too many requests. Wait 1 minute before trying again.");
  });

  it("ends the session on a 401", async () => {
    const ended = vi.fn();
    useAccessToken("expired", ended);
    answer(401, { detail: "The token has expired; sign in again." });
    await failure(api("GET", "/account"));
    expect(ended).toHaveBeenCalledWith("The token has expired; sign in again.");
  });

  it("calls with a test key in its place (Send a price change): its 401 is about that key and leaves the session", async () => {
    const ended = vi.fn();
    useAccessToken("token-1", ended);
    const fetchMock = answer(200, { received: 1 });
    expect(await apiWithKey("pda_test_abc", "POST", "/test/observations", { observations: [] })).toEqual({ received: 1 });
    const [, init] = fetchMock.mock.calls[0] as unknown as [string, RequestInit];
    expect(new Headers(init.headers).get("Authorization")).toBe("Bearer pda_test_abc");
    answer(401, { detail: "This API key is revoked." });
    expect((await failure(apiWithKey("pda_test_abc", "GET", "/products"))).message).toBe("This API key is revoked.");
    expect(ended).not.toHaveBeenCalled();
  });

  it("explains a network failure and a bodiless server error", async () => {
    useAccessToken("token-1");
    vi.stubGlobal("fetch", async () => {
      throw new TypeError("Failed to fetch");
    });
    expect((await failure(api("GET", "/account"))).message).toBe("Could not reach the API; check your connection and try again.");
    vi.stubGlobal("fetch", async () => new Response("oops", { status: 502 }));
    expect((await failure(api("GET", "/account"))).message).toBe("The server had a problem (HTTP 502); try again in a moment.");
  });

  it("words durations", () => {
    expect(duration(1)).toBe("1 second");
    expect(duration(59)).toBe("59 seconds");
    expect(duration(60)).toBe("1 minute");
    expect(duration(61)).toBe("2 minutes");
    expect(duration(3600)).toBe("1 hour");
    expect(duration(3700)).toBe("1 hour 2 minutes");
  });
});
