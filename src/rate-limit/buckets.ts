import type { Limits } from "./types.ts";

/** Hour and day quotas of the fixed buckets follow from the minute, as the plans' do. */
const perMinute = (n: number): Limits => ({ per_minute: n, per_hour: n * 60, per_day: n * 1440 });

/** The contract's buckets other than API keys; an API key's bucket is named by the key's hash. */
export const FIXED_BUCKETS = {
  account: perMinute(60),
  admin: perMinute(600),
  ip: perMinute(30),
} as const;

export type FixedBucket = keyof typeof FIXED_BUCKETS;

export const bucketName = (kind: FixedBucket, id: string) => `${kind}:${id}`;
