import { evictDurableObject, runDurableObjectAlarm } from "cloudflare:test";
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

  // Within the minute, further use schedules no new write, nor does it once the object has been evicted
  // and woken again (else a key used every few seconds, its object evicted between, would write D1 each time).
  await call("GET", "/competitors", { token: key });
  expect(await runDurableObjectAlarm(stub)).toBe(false);
  await evictDurableObject(stub);
  expect((await call("GET", "/competitors", { token: key })).status).toBe(200);
  expect(await runDurableObjectAlarm(stub)).toBe(false);
});

it("an alarm that fires after its object was evicted writes the time of the use, not 1970", async () => {
  const { token, key, keyId } = await accountWithKey("free");
  const before = Date.now();
  expect((await call("GET", "/competitors", { token: key })).status).toBe(200);
  const stub = env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName(await hashApiKey(key)));
  await evictDurableObject(stub); // the alarm is stored; a new instance of the object runs it
  expect(await runDurableObjectAlarm(stub)).toBe(true);
  const listed = (await expectJson(await call("GET", "/api-keys", { token }), 200)).api_keys.find((k: { id: string }) => k.id === keyId);
  expect(Date.parse(listed.last_used_at)).toBeGreaterThanOrEqual(before);
});
