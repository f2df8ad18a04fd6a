import { env } from "cloudflare:workers";
import { count } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { database } from "../../src/platform/db.ts";
import { webhooks } from "../../src/platform/tables.ts";
import { webhookUrlProblem } from "../../src/webhooks/url-policy.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";

let token: string;
beforeAll(async () => {
  token = (await freshAccount()).token;
});

const webhookCount = async () => (await database(env.DB).select({ n: count() }).from(webhooks))[0]!.n;

/** [url, what the detail must say]: each through POST /webhooks, the tests' config being WEBHOOK_ALLOW_INSECURE_URLS=false. */
const REFUSED: [string, RegExp][] = [
  // scheme and form
  ["http://hooks.example.com/", /must be an https:\/\/ URL/],
  ["ftp://hooks.example.com/", /must be an https:\/\/ URL/],
  ["https://user:pass@hooks.example.com/", /must not contain a user name or password/],
  ["//hooks.example.com/", /must be an absolute URL/],
  // RFC 3986 (format: uri): ASCII only, so an internationalised host arrives punycoded
  ["https://b\u00fccher.example/hook", /must be an absolute RFC 3986 URI: ASCII only, an internationalised host punycoded/],
  ["https://hooks.example.com/caf\u00e9", /RFC 3986/],
  ["https://hooks.example.com/a b", /RFC 3986/],
  [" https://hooks.example.com/", /RFC 3986/],
  ["https://hooks.example.com/%zz", /RFC 3986/],
  // names of this machine, and names that are not fully qualified
  ["https://localhost/", /localhost names this machine/],
  ["https://LOCALHOST:8443/", /localhost names this machine/],
  ["https://localhost./", /names this machine/],
  ["https://api.localhost/", /api\.localhost names this machine/],
  ["https://intranet/", /intranet is not a fully qualified domain name/],
  // loopback in every IPv4 spelling the URL parser accepts
  ["https://127.0.0.1/", /127\.0\.0\.1 is a loopback address \(127\.0\.0\.0\/8\)/],
  ["https://127.255.255.254/", /loopback/],
  ["https://2130706433/", /127\.0\.0\.1 is a loopback address/], // decimal
  ["https://0x7f000001/", /127\.0\.0\.1 is a loopback address/], // hex
  ["https://0x7f.0.0.1/", /127\.0\.0\.1 is a loopback address/], // hex first part
  ["https://0177.0.0.1/", /127\.0\.0\.1 is a loopback address/], // octal
  ["https://0177.0.0.01/", /127\.0\.0\.1 is a loopback address/], // octal parts
  ["https://127.1/", /127\.0\.0\.1 is a loopback address/], // short
  ["https://127.0.1/", /127\.0\.0\.1 is a loopback address/], // short
  ["https://%31%32%37.0.0.1/", /127\.0\.0\.1 is a loopback address/], // percent-encoded
  // private, CGNAT, link-local, unspecified and other non-public IPv4
  ["https://10.0.0.1/", /10\.0\.0\.1 is a private address \(10\.0\.0\.0\/8\)/],
  ["https://10.1/", /10\.0\.0\.1 is a private address/], // short
  ["https://167772161/", /10\.0\.0\.1 is a private address/], // decimal
  ["https://172.16.0.1/", /private address \(172\.16\.0\.0\/12\)/],
  ["https://172.31.255.255/", /private address \(172\.16\.0\.0\/12\)/],
  ["https://0xac100001/", /172\.16\.0\.1 is a private address/],
  ["https://192.168.1.1/", /private address \(192\.168\.0\.0\/16\)/],
  ["https://0300.0250.1.1/", /192\.168\.1\.1 is a private address/], // octal
  ["https://100.64.0.1/", /carrier-grade NAT address \(100\.64\.0\.0\/10\)/],
  ["https://100.127.255.255/", /carrier-grade NAT/],
  ["https://169.254.169.254/", /link-local address \(169\.254\.0\.0\/16\)/], // cloud metadata
  ["https://0.0.0.0/", /0\.0\.0\.0 is an unspecified/],
  ["https://0/", /0\.0\.0\.0 is an unspecified/],
  ["https://192.0.0.8/", /IETF protocol address/],
  ["https://198.18.0.1/", /benchmarking address/],
  ["https://224.0.0.1/", /multicast address/],
  ["https://255.255.255.255/", /reserved or broadcast address/],
  // IPv6
  ["https://[::1]/", /\[::1\] is the loopback address/],
  ["https://[0:0:0:0:0:0:0:1]/", /\[::1\] is the loopback address/],
  ["https://[::]/", /\[::\] is the unspecified address/],
  ["https://[fe80::1]/", /link-local address \(fe80::\/10\)/],
  ["https://[febf::1]/", /link-local address \(fe80::\/10\)/],
  ["https://[fc00::1]/", /unique local address \(fc00::\/7\)/],
  ["https://[fd12:3456:789a::1]/", /unique local address/],
  ["https://[fec0::1]/", /site-local/],
  ["https://[ff02::1]/", /multicast/],
  // IPv4 inside IPv6
  ["https://[::ffff:127.0.0.1]/", /IPv4-mapped address for 127\.0\.0\.1, a loopback address/],
  ["https://[::ffff:7f00:1]/", /IPv4-mapped address for 127\.0\.0\.1/],
  ["https://[::ffff:10.0.0.1]/", /IPv4-mapped address for 10\.0\.0\.1, a private address/],
  ["https://[::ffff:169.254.169.254]/", /IPv4-mapped address for 169\.254\.169\.254, a link-local/],
  ["https://[0:0:0:0:0:ffff:c0a8:101]/", /IPv4-mapped address for 192\.168\.1\.1/],
  ["https://[::127.0.0.1]/", /IPv4-compatible address for 127\.0\.0\.1/],
  ["https://[64:ff9b::a00:1]/", /NAT64 address for 10\.0\.0\.1/],
  ["https://[2002:7f00:1::]/", /6to4 address for 127\.0\.0\.1/],
];

describe("POST /webhooks refuses URLs that do not reach a public host over https (SSRF)", () => {
  for (const [url, detail] of REFUSED) {
    it(url, async () => {
      const before = await webhookCount();
      const body = await expectJson(await call("POST", "/webhooks", { token, body: { url } }), 400);
      expect(body.detail).toMatch(/^Invalid body: url: /);
      expect(body.detail).toMatch(detail);
      expect(await webhookCount()).toBe(before);
    });
  }
});

describe("public https URLs are accepted", () => {
  for (const url of [
    "https://hooks.example.com/price-data",
    "https://xn--bcher-kva.example/hook", // bücher.example, punycoded
    "https://hooks.example.com/caf%C3%A9",
    "https://hooks.example.com:8443/a?b=c",
    "https://8.8.8.8/hook",
    "https://[2606:4700:4700::1111]/hook",
    "https://[::ffff:8.8.8.8]/hook",
    "https://100.128.0.1/", // just past CGNAT
    "https://172.32.0.1/", // just past 172.16/12
    "https://localhost.example.com/", // only the label "localhost" itself is this machine
  ]) {
    it(url, () => {
      expect(webhookUrlProblem(url, false)).toBeUndefined();
    });
  }

  it("stores the URL as the parser normalises it", async () => {
    const created = await expectJson(await call("POST", "/webhooks", { token, body: { url: "HTTPS://Hooks.Example.COM:443/x" } }), 201);
    expect(created.url).toBe("https://hooks.example.com/x");
  });
});

describe("WEBHOOK_ALLOW_INSECURE_URLS=true (development only)", () => {
  it("allows http and local addresses such as 127.0.0.1, still only http(s) and no credentials", () => {
    expect(webhookUrlProblem("http://127.0.0.1:9000/", true)).toBeUndefined();
    expect(webhookUrlProblem("http://localhost:9000/", true)).toBeUndefined();
    expect(webhookUrlProblem("https://[::1]/", true)).toBeUndefined();
    expect(webhookUrlProblem("ftp://127.0.0.1/", true)).toMatch(/must be an http:\/\/ or https:\/\/ URL/);
    expect(webhookUrlProblem("http://u:p@127.0.0.1/", true)).toMatch(/user name or password/);
  });

  it("is off unless the var is exactly true (these tests run with false)", () => {
    expect(env.WEBHOOK_ALLOW_INSECURE_URLS).toBe("false");
  });
});
