import { uriProblem } from "../http/uri.ts";
import { invalidField } from "../http/validation.ts";

/**
 * Where a webhook may point (SSRF): `https://` to a public host. Refused: `localhost` and
 * `*.localhost`, single-label names, and IPv4/IPv6 literals in loopback, private, link-local, CGNAT,
 * unspecified, unique-local, multicast and reserved ranges, including IPv4 inside IPv6 (mapped,
 * compatible, NAT64, 6to4). The WHATWG URL parser first turns every IPv4 spelling (2130706433,
 * 0x7f000001, 0177.0.0.1, 127.1) into dotted decimal and compresses IPv6, so only those two forms
 * are checked here. Names are not resolved (Workers have no DNS API; their fetch cannot reach
 * private networks anyway). WEBHOOK_ALLOW_INSECURE_URLS=true (development) allows http and any host.
 */

const PUBLIC_HOST = "; webhooks must reach a public host";

/** [first address, prefix length, what it is]. */
const IPV4_BLOCKS: [string, number, string][] = [
  ["0.0.0.0", 8, "an unspecified ('this network') address (0.0.0.0/8)"],
  ["10.0.0.0", 8, "a private address (10.0.0.0/8)"],
  ["100.64.0.0", 10, "a carrier-grade NAT address (100.64.0.0/10)"],
  ["127.0.0.0", 8, "a loopback address (127.0.0.0/8)"],
  ["169.254.0.0", 16, "a link-local address (169.254.0.0/16)"],
  ["172.16.0.0", 12, "a private address (172.16.0.0/12)"],
  ["192.0.0.0", 24, "an IETF protocol address (192.0.0.0/24)"],
  ["192.168.0.0", 16, "a private address (192.168.0.0/16)"],
  ["198.18.0.0", 15, "a benchmarking address (198.18.0.0/15)"],
  ["224.0.0.0", 4, "a multicast address (224.0.0.0/4)"],
  ["240.0.0.0", 4, "a reserved or broadcast address (240.0.0.0/4)"],
];

const ipv4Number = (dotted: string) => dotted.split(".").reduce((n, part) => n * 256 + Number(part), 0);

const IPV4_RANGES = IPV4_BLOCKS.map(([first, bits, what]) => ({ start: ipv4Number(first), size: 2 ** (32 - bits), what }));

function ipv4Problem(value: number): string | undefined {
  return IPV4_RANGES.find((range) => value >= range.start && value < range.start + range.size)?.what;
}

const dotted = (value: number) => [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join(".");

/** The eight 16-bit groups of a compressed IPv6 address as URL serialises it (hex groups, one "::" at most). */
function ipv6Groups(text: string): number[] | undefined {
  const [head = "", tail, extra] = text.split("::");
  if (extra !== undefined) return undefined;
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((group) => Number.parseInt(group, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  const groups = tail === undefined ? left : [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}

function ipv6Problem(groups: number[]): string | undefined {
  const [g0 = 0, g1 = 0, , , , g5 = 0, g6 = 0, g7 = 0] = groups;
  const zeroUntil = (n: number) => groups.slice(0, n).every((g) => g === 0);
  const embedded = (high: number, low: number, kind: string) => {
    const v4 = high * 65536 + low;
    const what = ipv4Problem(v4);
    return what ? `${kind} ${dotted(v4)}, ${what}` : undefined;
  };
  if (zeroUntil(8)) return "the unspecified address (::)";
  if (zeroUntil(7) && g7 === 1) return "the loopback address (::1)";
  if (zeroUntil(5) && g5 === 0xffff) return embedded(g6, g7, "an IPv4-mapped address for");
  if (zeroUntil(6)) return embedded(g6, g7, "an IPv4-compatible address for");
  if (g0 === 0x64 && g1 === 0xff9b && groups.slice(2, 6).every((g) => g === 0)) return embedded(g6, g7, "a NAT64 address for");
  if (g0 === 0x2002) return embedded(g1, groups[2] ?? 0, "a 6to4 address for");
  if ((g0 & 0xfe00) === 0xfc00) return "a unique local address (fc00::/7)";
  if ((g0 & 0xffc0) === 0xfe80) return "a link-local address (fe80::/10)";
  if ((g0 & 0xffc0) === 0xfec0) return "a site-local address (fec0::/10)";
  if ((g0 & 0xff00) === 0xff00) return "a multicast address (ff00::/8)";
  return undefined;
}

function hostProblem(hostname: string): string | undefined {
  if (hostname.startsWith("[")) {
    const groups = ipv6Groups(hostname.slice(1, -1));
    if (!groups) return `has an IPv6 address that cannot be checked${PUBLIC_HOST}`;
    const what = ipv6Problem(groups);
    return what && `${hostname} is ${what}${PUBLIC_HOST}`;
  }
  if (/^\d+\.\d+\.\d+\.\d+$/.test(hostname)) {
    const what = ipv4Problem(ipv4Number(hostname));
    return what && `${hostname} is ${what}${PUBLIC_HOST}`;
  }
  const name = hostname.replace(/\.+$/, "");
  if (name === "localhost" || name.endsWith(".localhost")) return `${hostname} names this machine${PUBLIC_HOST}`;
  if (!name.includes(".")) return `${hostname} is not a fully qualified domain name${PUBLIC_HOST}`;
  return undefined;
}

/** The URL as stored (WHATWG-normalised), or the 400 that names the field and says why not. */
export function acceptedWebhookUrl(raw: string, allowInsecure: boolean): string {
  const problem = webhookUrlProblem(raw, allowInsecure);
  if (problem) throw invalidField("body", { field: "url", message: problem });
  return new URL(raw).href;
}

/**
 * Why `raw` may not be a webhook URL (a phrase to follow "url: "), or undefined when it may: first the
 * API's one URL rule (src/http/uri.ts), then where a webhook may point.
 */
export function webhookUrlProblem(raw: string, allowInsecure: boolean): string | undefined {
  const notUri = uriProblem(raw);
  if (notUri) return notUri;
  const url = new URL(raw);
  if (url.protocol !== "https:" && !(allowInsecure && url.protocol === "http:")) {
    return allowInsecure ? "must be an http:// or https:// URL" : "must be an https:// URL (http:// is allowed only in development)";
  }
  if (url.username || url.password) return "must not contain a user name or password";
  return allowInsecure ? undefined : hostProblem(url.hostname);
}
