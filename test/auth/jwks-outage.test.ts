import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { verifyIdpToken } from "../../src/auth/idp.ts";
import { ApiError } from "../../src/http/errors.ts";
import { type Config, readConfig } from "../../src/platform/config.ts";
import { HOUR_MS, MINUTE_MS } from "../../src/platform/time.ts";
import { captureLogs } from "../helpers/logs.ts";
import { accountToken } from "../helpers/tokens.ts";

/**
 * The IdP's JWKS failing. The key set is served over real HTTP by the test IdP (test/helpers/idp-server.ts) at a
 * path of its own per test, which can be taken down (503) and counts its fetches; only Date is faked.
 */

/** A fetched set is fresh for 10 minutes; the last good one serves up to 24 hours (contract); one fetch per 30 s during an outage. */
const KEYS_FRESH_MS = 10 * MINUTE_MS;
const LAST_GOOD_KEYS_MS = 24 * HOUR_MS;
const REFETCH_COOLDOWN_MS = 30_000;

/** An IdP of its own: its JWKS URL, and the switches of the test server behind it. */
function switchableIdp() {
  const base = new URL(`/switchable/${crypto.randomUUID()}/`, env.IDP_JWKS_URL);
  const post = async (action: string) => expect((await fetch(new URL(action, base), { method: "POST" })).status).toBe(200);
  const config = { ...(readConfig(env) as Config), IDP_JWKS_URL: new URL("jwks.json", base).href };
  return {
    down: () => post("down"),
    up: () => post("up"),
    fetches: async () => Number(await (await fetch(new URL("fetches", base))).text()),
    /** Verifies a token minted now (by the faked clock) for `sub`, against this IdP's key set. */
    verify: async (sub: string) => verifyIdpToken(await accountToken(sub), config),
  };
}

let now = Date.now();
function advance(ms: number) {
  now += ms;
  vi.setSystemTime(now);
}

afterEach(() => vi.useRealTimers());

describe("when the IdP's key set cannot be fetched", () => {
  it("the last good set keeps verifying tokens for up to 24 hours after it was fetched; then 503 until the IdP is back", async () => {
    const logs = captureLogs(); // the outage's warnings and, past 24 hours, its error: checked at the end
    now = Date.now();
    vi.useFakeTimers({ toFake: ["Date"], now });
    const idp = switchableIdp();
    expect(await idp.verify("before")).toMatchObject({ sub: "before" });
    await idp.down();

    advance(KEYS_FRESH_MS + MINUTE_MS); // past the 10 minutes a set is fresh: the refresh fails, the last good set is used
    expect(await idp.verify("at-11-min")).toMatchObject({ sub: "at-11-min" });
    advance(23 * HOUR_MS);
    expect(await idp.verify("at-23-h")).toMatchObject({ sub: "at-23-h" });
    expect(await idp.fetches()).toBe(3);

    advance(LAST_GOOD_KEYS_MS - 23 * HOUR_MS); // 24 h and a minute after the last good fetch
    const refused = await idp.verify("at-24-h").catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ status: 503 });

    await idp.up();
    advance(REFETCH_COOLDOWN_MS);
    expect(await idp.verify("back")).toMatchObject({ sub: "back" });
    expect(logs.map((line) => [line.level, line.message])).toEqual([
      ["warn", "JWKS refresh failed"],
      ["warn", "JWKS refresh failed"],
      ["warn", "JWKS refresh failed"],
      ["error", "JWKS unavailable"],
    ]);
  });

  it("concurrent requests share one fetch, and during an outage fetch at most once per 30 s", async () => {
    const logs = captureLogs();
    now = Date.now();
    vi.useFakeTimers({ toFake: ["Date"], now });
    const idp = switchableIdp();
    const verified = await Promise.all(Array.from({ length: 20 }, (_, i) => idp.verify(`first-${i}`)));
    expect(verified).toHaveLength(20);
    expect(await idp.fetches()).toBe(1);

    await idp.down();
    advance(KEYS_FRESH_MS);
    await Promise.all(Array.from({ length: 20 }, (_, i) => idp.verify(`stale-${i}`)));
    expect(await idp.fetches()).toBe(2);
    advance(REFETCH_COOLDOWN_MS - 1000);
    await Promise.all(Array.from({ length: 5 }, (_, i) => idp.verify(`cooling-${i}`)));
    expect(await idp.fetches()).toBe(2);
    advance(1000);
    await idp.verify("retry");
    expect(await idp.fetches()).toBe(3);
    expect(logs.map((line) => [line.level, line.message])).toEqual([
      ["warn", "JWKS refresh failed"],
      ["warn", "JWKS refresh failed"],
    ]);
  });
});
