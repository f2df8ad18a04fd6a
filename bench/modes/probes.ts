/**
 * The measurements of `npm run bench` other than throughput: exactness under concurrency,
 * revocation lag, and the work one request costs (from X-Work-Counts).
 */
import { SMALL_PATH } from "../harness/start.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Node's fetch: its default pool opens as many connections to an origin as there are requests in
 * flight, so the exactness burst is really concurrent. Every request is bounded by a timeout.
 */
async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; bytes: number }> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(30_000) });
  const body = await res.arrayBuffer();
  return { status: res.status, headers: res.headers, bytes: body.byteLength };
}

const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });

// ---- Exactness ------------------------------------------------------------------------------------

export interface Exactness {
  keys: number;
  requestsPerKey: number;
  limit: number;
  admitted: number;
  /** Sum over keys of max(0, admitted − limit). */
  beyondLimit: number;
  /** Keys that admitted more than the limit. */
  keysOver: number;
  refused: number;
  otherStatuses: Record<string, number>;
  /** True when the burst spanned a clock-minute boundary (fixed windows reset there). */
  crossedMinute: boolean;
}

/** `perKey` concurrent requests at each key, all keys at once; counts the 200s beyond `limit` per key. */
export async function exactness(url: string, keys: readonly string[], perKey: number, limit: number): Promise<Exactness> {
  const started = Date.now();
  const results = await Promise.all(
    keys.map(async (key) =>
      Promise.all(Array.from({ length: perKey }, () => get(`${url}${SMALL_PATH}`, bearer(key)).then((r) => r.status))),
    ),
  );
  const ended = Date.now();
  const otherStatuses: Record<string, number> = {};
  let admitted = 0;
  let refused = 0;
  let beyondLimit = 0;
  let keysOver = 0;
  for (const statuses of results) {
    const ok = statuses.filter((s) => s === 200).length;
    admitted += ok;
    refused += statuses.filter((s) => s === 429).length;
    for (const s of statuses) if (s !== 200 && s !== 429) otherStatuses[s] = (otherStatuses[s] ?? 0) + 1;
    beyondLimit += Math.max(0, ok - limit);
    if (ok > limit) keysOver++;
  }
  return {
    keys: keys.length,
    requestsPerKey: perKey,
    limit,
    admitted,
    beyondLimit,
    keysOver,
    refused,
    otherStatuses,
    crossedMinute: Math.floor(started / 60_000) !== Math.floor(ended / 60_000),
  };
}

// ---- Revocation lag -----------------------------------------------------------------------------

export interface Revocation {
  /** Requests sent with the key in the whole trial. */
  sent: number;
  /** 200s among requests that started after the DELETE's response arrived: the lag. */
  admittedAfter: number;
  /** Requests that started after the DELETE answered. */
  sentAfter: number;
  /** 200s of requests already in flight when the DELETE answered (they were admitted before it). */
  inFlightAdmitted: number;
  deleteMs: number;
  statusesAfter: Record<string, number>;
}

/**
 * Fires requests with one key continuously (a few loops, paced so the key stays under its limit),
 * revokes it with DELETE /api-keys/:id, keeps firing, and counts the 200s of requests that started
 * after the DELETE's response arrived.
 */
export async function revocationLag(
  url: string,
  key: { id: string; key: string },
  jwt: string,
  options: { beforeMs: number; afterMs: number },
): Promise<Revocation> {
  const records: { start: number; end: number; status: number }[] = [];
  let stop = false;
  const loop = async () => {
    while (!stop) {
      const start = performance.now();
      const { status } = await get(`${url}${SMALL_PATH}`, bearer(key.key));
      records.push({ start, end: performance.now(), status });
      await sleep(8);
    }
  };
  const loops = Array.from({ length: 4 }, loop);
  await sleep(options.beforeMs);
  const deleteStart = performance.now();
  const res = await fetch(`${url}/api-keys/${key.id}`, { method: "DELETE", headers: bearer(jwt), signal: AbortSignal.timeout(30_000) });
  const answer = await res.text();
  const answeredAt = performance.now();
  if (res.status !== 200) {
    stop = true;
    await Promise.all(loops);
    throw new Error(`DELETE /api-keys/${key.id} answered ${res.status}: ${answer}`);
  }
  await sleep(options.afterMs);
  stop = true;
  await Promise.all(loops);
  const after = records.filter((r) => r.start > answeredAt);
  const statusesAfter: Record<string, number> = {};
  for (const r of after) statusesAfter[r.status] = (statusesAfter[r.status] ?? 0) + 1;
  return {
    sent: records.length,
    admittedAfter: after.filter((r) => r.status === 200).length,
    sentAfter: after.length,
    inFlightAdmitted: records.filter((r) => r.start <= answeredAt && r.end > answeredAt && r.status === 200).length,
    deleteMs: answeredAt - deleteStart,
    statusesAfter,
  };
}

// ---- Work per request ---------------------------------------------------------------------------

export interface WorkCount {
  d1: number;
  keyDo: number;
  otherDo: number;
  status: number;
}

function parseWork(header: string | null, status: number): WorkCount {
  const field = (name: string) => new RegExp(`(?:^|; )${name}=(\\d+)`).exec(header ?? "")?.[1];
  const [d1, keyDo, otherDo] = ["d1", "key-do", "other-do"].map(field);
  if (d1 === undefined || keyDo === undefined || otherDo === undefined)
    throw new Error(`No X-Work-Counts header (status ${status}); is EXPOSE_WORK_COUNTS=true?`);
  return { d1: Number(d1), keyDo: Number(keyDo), otherDo: Number(otherDo), status };
}

async function workOf(url: string, key: string, path = SMALL_PATH): Promise<WorkCount> {
  const res = await get(`${url}${path}`, bearer(key));
  return parseWork(res.headers.get("X-Work-Counts"), res.status);
}

export interface WorkReport {
  coldKey: WorkCount;
  /** Sequential requests with the same, already seen, key. */
  seen: {
    samples: number;
    seconds: number;
    withD1: number;
    d1Total: number;
    keyDoTotal: number;
    otherDoTotal: number;
    statuses: Record<string, number>;
  };
  malformed: WorkCount;
  /** The request the key's object refuses, then one refused from the isolate's memory. */
  firstRefusal: WorkCount;
  laterRefusal: WorkCount;
}

export async function workPerRequest(
  url: string,
  keys: { seen: string; overLimit: string; overLimitPerMinute: number },
  samples: number,
): Promise<WorkReport> {
  const coldKey = await workOf(url, keys.seen);
  const started = performance.now();
  const seen = { samples, seconds: 0, withD1: 0, d1Total: 0, keyDoTotal: 0, otherDoTotal: 0, statuses: {} as Record<string, number> };
  for (let i = 0; i < samples; i++) {
    const work = await workOf(url, keys.seen);
    seen.statuses[work.status] = (seen.statuses[work.status] ?? 0) + 1;
    if (work.d1 > 0) seen.withD1++;
    seen.d1Total += work.d1;
    seen.keyDoTotal += work.keyDo;
    seen.otherDoTotal += work.otherDo;
  }
  seen.seconds = (performance.now() - started) / 1000;
  // Same length and alphabet as a real key, wrong checksum.
  const malformed = await workOf(url, `pda_live_${"A".repeat(40)}000000`);
  for (let i = 0; i < keys.overLimitPerMinute; i++) await workOf(url, keys.overLimit);
  const firstRefusal = await workOf(url, keys.overLimit);
  const laterRefusal = await workOf(url, keys.overLimit);
  return { coldKey, seen, malformed, firstRefusal, laterRefusal };
}

// ---- Catalogue ----------------------------------------------------------------------------------

export async function fetchBytes(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; bytes: number; etag: string | null }> {
  const res = await get(url, headers);
  return { status: res.status, bytes: res.bytes, etag: res.headers.get("ETag") };
}
