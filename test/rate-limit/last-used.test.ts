import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { hashApiKey } from "../../src/auth/api-key.ts";
import { call, expectJson } from "../helpers/http.ts";
import { accountWithKey } from "../helpers/keys.ts";

it("last_used_at is written by the key's object's alarm, off the request path", async () => {
  const { token, key, keyId } = await accountWithKey("free");
  const listed = async () => (await expectJson(await call("GET", "/api-keys", { token }), 200)).api_keys.find((k: { id: string }) => k.id === keyId);
  expect((await listed()).last_used_at).toBeNull();

  const used = await call("GET", "/competitors", { token: key });
  expect(used.status).toBe(200);

  const stub = env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName(await hashApiKey(key)));
  expect(await runDurableObjectAlarm(stub)).toBe(true);
  const lastUsed = (await listed()).last_used_at;
  expect(lastUsed).toMatch(/^\d{4}-\d\d-\d\dT/);

  // Within the minute, further use schedules no new write.
  await call("GET", "/competitors", { token: key });
  expect(await runDurableObjectAlarm(stub)).toBe(false);
});
