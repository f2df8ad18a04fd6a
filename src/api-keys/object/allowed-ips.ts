import ipaddr from "ipaddr.js";

/**
 * A key's `allowed_ips`: IPv4 and IPv6 CIDRs (a bare address is /32 or /128). The pattern below is the
 * rule (the OpenAPI document states it, so clients and the document agree on what is valid); ipaddr.js
 * does the arithmetic. IPv4-mapped IPv6 (`::ffff:192.0.2.1`) is IPv4 on both sides: as a client address
 * and as a range (`::ffff:192.0.2.0/120` is `192.0.2.0/24`).
 */

export const MAX_ALLOWED_IPS = 50;

const OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const IPV4 = `${OCTET}(?:\\.${OCTET}){3}`;
const H16 = "[0-9A-Fa-f]{1,4}";
const LS32 = `(?:${H16}:${H16}|${IPV4})`;
/** RFC 3986's IPv6address (no zone identifier). */
const IPV6 = [
  `(?:${H16}:){6}${LS32}`,
  `::(?:${H16}:){5}${LS32}`,
  `(?:${H16})?::(?:${H16}:){4}${LS32}`,
  `(?:(?:${H16}:){0,1}${H16})?::(?:${H16}:){3}${LS32}`,
  `(?:(?:${H16}:){0,2}${H16})?::(?:${H16}:){2}${LS32}`,
  `(?:(?:${H16}:){0,3}${H16})?::${H16}:${LS32}`,
  `(?:(?:${H16}:){0,4}${H16})?::${LS32}`,
  `(?:(?:${H16}:){0,5}${H16})?::${H16}`,
  `(?:(?:${H16}:){0,6}${H16})?::`,
].join("|");
export const CIDR_PATTERN = `^(?:${IPV4}(?:/(?:3[0-2]|[12]?[0-9]))?|(?:${IPV6})(?:/(?:12[0-8]|1[01][0-9]|[1-9]?[0-9]))?)$`;

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** A valid CIDR (per CIDR_PATTERN) as a range, a mapped IPv6 range as IPv4, host bits cleared. */
function range(cidr: string): Range {
  const [address, bits] = cidr.includes("/")
    ? ipaddr.parseCIDR(cidr)
    : ((parsed) => [parsed, parsed.kind() === "ipv4" ? 32 : 128] as Range)(ipaddr.parse(cidr));
  if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
    return [(address as ipaddr.IPv6).toIPv4Address(), bits - 96];
  }
  return [address, bits];
}

/** The form records show: the network address and its prefix length (`10.1.2.3` → `10.1.2.3/32`, `10.1.2.3/8` → `10.0.0.0/8`). */
export function canonicalCidr(cidr: string): string {
  const [address, bits] = range(cidr);
  const network =
    address.kind() === "ipv4"
      ? ipaddr.IPv4.networkAddressFromCIDR(`${address}/${bits}`)
      : ipaddr.IPv6.networkAddressFromCIDR(`${address}/${bits}`);
  return `${network.toString()}/${bits}`;
}

/** The client's address as compared: a mapped IPv6 address is its IPv4 address. Undefined when it is not an address. */
function clientAddress(ip: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (!ipaddr.isValid(ip)) return undefined;
  return ipaddr.process(ip);
}

/** Whether the client address is in one of the (canonical) CIDRs. An address that cannot be read is in none. */
export function isAllowed(ip: string, cidrs: readonly string[]): boolean {
  const address = clientAddress(ip);
  if (!address) return false;
  return cidrs.some((cidr) => {
    const [network, bits] = range(cidr);
    return network.kind() === address.kind() && address.match(network, bits);
  });
}
