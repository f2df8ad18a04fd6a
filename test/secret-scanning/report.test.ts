import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ApiError } from "../../client/index.ts";
import { generateApiKey } from "../../src/api-keys/format.ts";
import { addKey, freshAccount } from "../helpers/accounts.ts";
import { base64, p1363ToDer } from "../helpers/der.ts";
import { call, expectJson, rateLimitOf, workCounts } from "../helpers/http.ts";
import { found, keyList, rawSignature, report, sha256Hex } from "../helpers/secret-scanning.ts";

const keyRecord = async (token: string, id: string) => {
  const { api_keys } = await expectJson(await call("GET", "/api-keys", { token }), 200);
  return api_keys.find((key) => key.id === id)!;
};

const leakEvents = (accountId: string) =>
  env.DB.prepare("SELECT id, type, payload FROM events WHERE account_id = ? AND type = 'api_key.leaked'")
    .bind(accountId)
    .all<{ id: string; payload: string }>();

describe("POST /secret-scanning/github", () => {
  it("revokes a live key before answering, records where it was found, and tells its account", async () => {
    const { sub, token, keyId, key } = await freshAccount();
    const other = await addKey(token);
    await expectJson(await call("GET", "/competitors", { token: key }), 200);
    const url = "https://github.com/someone/shop/blob/0123456789abcdef0123456789abcdef01234567/.env";

    const feedback = await expectJson(await report([found(key, url, "commit")]), 200);
    expect(feedback).toEqual([{ token_hash: await sha256Hex(key), token_type: "price_data_api_key", label: "true_positive" }]);

    const refused = await expectJson(await call("GET", "/competitors", { token: key }), 401);
    expect(refused.detail).toMatch(/revoked/);
    await expectJson(await call("GET", "/competitors", { token: other.key }), 200); // only the reported key

    const record = await keyRecord(token, keyId);
    expect(record).toMatchObject({ status: "revoked", revoked_reason: "leaked", leak_url: url });
    expect(record.leaked_at).toBe(record.revoked_at);

    const { results } = await leakEvents(sub);
    expect(results).toHaveLength(1);
    expect(JSON.parse(results[0]!.payload)).toEqual({
      type: "api_key.leaked",
      timestamp: record.revoked_at,
      data: {
        account_id: sub,
        key_id: keyId,
        prefix: key.slice(0, 17),
        name: "test key",
        url,
        source: "commit",
        revoked_at: record.revoked_at,
      },
    });
    // Never in the public feed.
    const feed = await expectJson(await call("GET", "/events?limit=1000", { token: other.key }), 200);
    expect(feed.events.map((e) => e.id)).not.toContain(results[0]!.id);
  });

  it("labels what was never a key false_positive and a deleted key true_positive, changing nothing", async () => {
    const { token, keyId, key } = await freshAccount();
    await expectJson(await call("DELETE", `/api-keys/${keyId}`, { token }), 200);
    const before = await keyRecord(token, keyId);
    const madeUp = generateApiKey("pda").key; // well formed, never stored
    const tokens = [key, madeUp, "pda_live_typo", "ghp_notours", "", "ünïcødé 🔑"];
    const feedback = await expectJson(await report(tokens.map((t) => found(t))), 200);
    expect(feedback.map((f) => f.label)).toEqual([
      "true_positive",
      "false_positive",
      "false_positive",
      "false_positive",
      "false_positive",
      "false_positive",
    ]);
    expect(feedback.map((f) => f.token_hash)).toEqual(await Promise.all(tokens.map(sha256Hex)));
    expect(await keyRecord(token, keyId)).toEqual({ ...before, revoked_reason: "deleted" });
  });

  it("changes nothing when the same report comes again (a replay), and answers the same", async () => {
    const { sub, token, keyId, key } = await freshAccount();
    const body = JSON.stringify([found(key), found(key, "https://gist.github.com/x/1", "gist")]);
    const signature = base64(p1363ToDer(await rawSignature(body)));
    const first = await expectJson(await report(body, { signature }), 200);
    const record = await keyRecord(token, keyId);
    expect(record.leak_url).toBe(found(key).url); // the first occurrence
    const again = await expectJson(await report(body, { signature }), 200);
    expect(again).toEqual(first);
    expect(await keyRecord(token, keyId)).toEqual(record);
    expect((await leakEvents(sub)).results).toHaveLength(1);
  });

  it("refuses a tampered body, a missing, malformed or foreign signature, and an unknown key identifier, changing nothing", async () => {
    const { key } = await freshAccount();
    const body = JSON.stringify([found(key)]);
    const signature = base64(p1363ToDer(await rawSignature(body)));
    const tampered = body.replace("content", "contenT");
    const foreign = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign", "verify"])) as CryptoKeyPair;
    const cases: [string, Promise<Response>, RegExp][] = [
      ["tampered", report(tampered, { signature }), /not a valid signature/],
      ["a byte more", report(`${body} `, { signature }), /not a valid signature/],
      ["foreign key", report(body, { key: foreign.privateKey }), /not a valid signature/],
      ["raw r‖s instead of DER", report(body, { signature: base64(await rawSignature(body)) }), /not a valid signature/],
      ["not base64", report(body, { signature: "%%%" }), /not a valid signature/],
      ["unknown identifier", report(body, { identifier: "no-such-key" }), /names no key/],
      ["no headers", call("POST", "/secret-scanning/github", { body }), /headers are required/],
    ];
    for (const [what, response, detail] of cases) {
      const refused = await expectJson<ApiError>((await response) as Response, 401);
      expect(refused.detail, what).toMatch(detail);
      expect(refused.detail, what).not.toContain(key.slice(0, 12));
    }
    await expectJson(await call("GET", "/competitors", { token: key }), 200);
  });

  it("takes signatures whose r and s have leading zero bytes (short DER integers)", async () => {
    const { key } = await freshAccount();
    // Search bodies until WebCrypto signs one whose r, and one whose s, is short: a zero byte, then no top bit (1 in 512 each).
    for (const half of [0, 32]) {
      let body = "";
      let raw: Uint8Array = new Uint8Array(64).fill(1);
      for (let i = 0; raw[half] !== 0 || raw[half + 1]! >= 0x80; i++) {
        body = JSON.stringify([found(key, `https://github.com/a/b/blob/${i}/x`)]);
        raw = await rawSignature(body);
      }
      const signature = p1363ToDer(raw);
      expect(signature[half === 0 ? 3 : 5 + signature[3]!]).toBeLessThan(32); // the short integer's DER length
      await expectJson(await report(body, { signature: base64(signature) }), 200);
    }
    await expectJson(await call("GET", "/competitors", { token: key }), 401);
  });

  it("refuses a signed body that is not a report (400), counted in the reports' own bucket", async () => {
    const res = await report({ token: "x" });
    expect((await expectJson(res, 400)).detail).toMatch(/body/);
    expect(rateLimitOf(res).limit).toBe(600);
    await expectJson(await report([{ type: "x" }]), 400);
    expect(rateLimitOf(await report("[]")).limit).toBe(600);
  });

  it("counts what is not GitHub's in the client IP's bucket: 600 unsigned POSTs cannot lock GitHub out", async () => {
    const { key } = await freshAccount();
    const attacker = { "CF-Connecting-IP": "203.0.113.66" };
    const body = JSON.stringify([found(key)]);
    const statuses = new Map<number, number>();
    for (let i = 0; i < 600; i++) {
      const unsigned =
        i % 2 === 0
          ? await call("POST", "/secret-scanning/github", { body, headers: attacker })
          : await call("POST", "/secret-scanning/github", {
              body,
              headers: { ...attacker, "Github-Public-Key-Identifier": keyList.identifier, "Github-Public-Key-Signature": "MEUCIQ==" },
            });
      statuses.set(unsigned.status, (statuses.get(unsigned.status) ?? 0) + 1);
      if (unsigned.status === 429) expect(rateLimitOf(unsigned).limit).toBe(30);
      await unsigned.body?.cancel();
    }
    expect(statuses.get(401)).toBe(30); // the client IP's minute
    expect(statuses.get(429)).toBe(570);

    // GitHub's next correctly signed report still gets through, and the key is revoked.
    const res = await report([found(key)]);
    expect((await expectJson(res, 200))[0]!.label).toBe("true_positive");
    expect(rateLimitOf(res).limit).toBe(600);
    await expectJson(await call("GET", "/competitors", { token: key }), 401);
  });

  it("refuses a report without both signature headers before reading its body", async () => {
    // A streamed body (no Content-Length) that fails if read: a 401 shows nothing waited for it.
    const unread = new ReadableStream<Uint8Array>({
      pull() {
        throw new Error("the body was read");
      },
    });
    const res = await exports.default.fetch(
      new Request("https://api.test/secret-scanning/github", {
        method: "POST",
        body: unread,
        headers: { "CF-Connecting-IP": "203.0.113.67", "Github-Public-Key-Identifier": keyList.identifier },
      }),
    );
    expect((await expectJson<ApiError>(res, 401)).detail).toMatch(/headers are required/);
  });

  it("answers a 10,000-token report in a few D1 round trips, revoking the live keys among them", async () => {
    const a = await freshAccount();
    const b = await freshAccount();
    const bSecond = await addKey(b.token);
    const live = [a.key, b.key, bSecond.key];
    const noise = Array.from({ length: 10_000 - live.length }, (_, i) =>
      i % 2 ? generateApiKey("pda").key : `token-${i}-${crypto.randomUUID()}`,
    );
    const tokens = [...noise.slice(0, 5000), ...live, ...noise.slice(5000)];
    const res = await report(tokens.map((t, i) => found(t, `https://github.com/org/repo-${i}/blob/main/é.js`)));
    const feedback = await expectJson(res, 200);
    expect(feedback).toHaveLength(10_000);
    expect(feedback.filter((f) => f.label === "true_positive").map((f) => f.token_hash)).toEqual(await Promise.all(live.map(sha256Hex)));
    const work = workCounts(res);
    expect(work.d1).toBeLessThanOrEqual(4); // the lookups (one batch), the revocations with their events (one batch), the relay
    for (const token of live) await expectJson(await call("GET", "/competitors", { token }), 401);
    expect((await leakEvents(b.sub)).results).toHaveLength(2);
  });
});

describe("GitHub's key list", () => {
  afterEach(() => vi.useRealTimers());
  const fetches = async () => Number(await (await fetch(`${keyList.origin}/fetches`)).text());

  it("is fetched again for an unknown identifier at most once a minute, and picks up a new key", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 3_600_000); // past any earlier fetch's minute and hour
    const { key } = await freshAccount();
    const body = JSON.stringify([found(key)]);
    await expectJson(await report(body, { identifier: "unknown-1" }), 401);
    const afterFirst = await fetches();
    await expectJson(await report(body, { identifier: "unknown-2" }), 401);
    await expectJson(await report(body, { identifier: "unknown-3" }), 401);
    expect(await fetches()).toBe(afterFirst); // within the minute: no refetch

    // GitHub adds a key: the first report it signs, a minute later, makes the worker fetch the list again.
    const next = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])) as CryptoKeyPair;
    const spki = new Uint8Array((await crypto.subtle.exportKey("spki", next.publicKey)) as ArrayBuffer);
    const pem = `-----BEGIN PUBLIC KEY-----\n${base64(spki).replace(/.{64}/g, "$&\n")}\n-----END PUBLIC KEY-----\n`;
    await fetch(`${keyList.origin}/keys`, { method: "POST", body: JSON.stringify({ key_identifier: "rotated-key", key: pem }) });
    await expectJson(await report(body, { identifier: "rotated-key", key: next.privateKey }), 401); // still within the minute
    vi.setSystemTime(Date.now() + 61_000);
    await expectJson(await report(body, { identifier: "rotated-key", key: next.privateKey }), 200);
    expect(await fetches()).toBe(afterFirst + 1);
    await expectJson(await call("GET", "/competitors", { token: key }), 401);
  });
});
