import {
  convertIPv4BinaryToString,
  convertIPv4MappedIPv6ToIPv4,
  convertIPv6BinaryToString,
  convertIPv6ToBinary,
  isIPv4MappedIPv6,
} from "hono/utils/ipaddr";
import type { Limits } from "./types.ts";

/** Hour and day quotas of the fixed buckets follow from the minute, as the plans' do. */
const perMinute = (n: number): Limits => ({ per_minute: n, per_hour: n * 60, per_day: n * 1440 });

/** The contract's buckets other than API keys; an API key's bucket is named by the key's hash. */
export const FIXED_BUCKETS = {
  account: perMinute(60),
  admin: perMinute(600),
  ip: perMinute(30),
  /** GitHub's secret-scanning reports (src/secret-scanning/) whose signature verified: one bucket, whatever the address. */
  "secret-scanning": perMinute(600),
} as const;

export type FixedBucket = keyof typeof FIXED_BUCKETS;

export const bucketName = (kind: FixedBucket, id: string) => `${kind}:${id}`;

/**
 * The client-IP bucket's name for an address: an IPv4 address itself; an IPv6 address by its /64, the
 * network one subscriber is given (any of its 2^64 addresses is theirs to pick, so one bucket per address
 * would be no limit at all); an IPv4-mapped IPv6 address as its IPv4 address. Anything else as sent.
 */
export function ipBucketName(address: string): string {
  if (!address.includes(":")) return bucketName("ip", address);
  let binary: bigint;
  try {
    binary = convertIPv6ToBinary(address);
  } catch {
    return bucketName("ip", address);
  }
  if (isIPv4MappedIPv6(binary)) return bucketName("ip", convertIPv4BinaryToString(convertIPv4MappedIPv6ToIPv4(binary)));
  return bucketName("ip", `${convertIPv6BinaryToString((binary >> 64n) << 64n)}/64`);
}
