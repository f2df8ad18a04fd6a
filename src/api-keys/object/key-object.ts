import { logger } from "../../platform/log.ts";
import type { ObjectAnswer } from "../../platform/metered.ts";
import { MeteredObject } from "../../platform/metered-object.ts";
import type { Limits } from "../../rate-limit/types.ts";
import type { Counter, StoredCounters } from "../../rate-limit/window.ts";
import { budgetSpent, KeyBudgets } from "./budgets.ts";
import { loadKeyState, outsideRestrictions, pastExpiry, withPushes } from "./key-record.ts";
import { lastUsedLog, MARK_EVERY_MS } from "./last-used.ts";
import { AdmissionWindow, type StoredBlock } from "./reservations.ts";
import { type KeyAdmission, type KeyRequest, type KeyState, UNKNOWN_KEY_MS, type UsageCount, type UsageSpan } from "./types.ts";
import { OLDEST_COLUMNS, type OldestColumns, type PendingHour, USAGE_SCHEMA, USAGE_UPGRADE, UsageLog } from "./usage-log.ts";
import { announceUsage, thresholdsCrossed } from "./usage-threshold.ts";

/** The one row that holds the key's counters and its block: written with each block, read once per wake. */
interface StateRow extends StoredCounters, StoredBlock, Record<string, SqlStorageValue> {
  /** The current hour's usage, minute by minute (a PendingHour as JSON): moved to the usage table when the hour ends. */
  usage_hour: string;
  /** When a use was last marked for `last_used_at`: kept, so a woken object does not mark again too soon. */
  last_used: number;
}

/** Writes the whole state row: one statement, and one row, per write. */
const WRITE_STATE = `INSERT OR REPLACE INTO state (id, log, hour_start, hour_count, day_start, day_count, usage_hour, last_used,
    reserved, reserved_until) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
/** The same write once the row exists: an update in place, where a replace deletes the row and inserts it again. */
const UPDATE_STATE = `UPDATE state SET log = ?, hour_start = ?, hour_count = ?, day_start = ?, day_count = ?, usage_hour = ?, last_used = ?,
    reserved = ?, reserved_until = ? WHERE id = 1`;

/** The object's tables, created by its first write: an object that only ever answers "unknown key" stores nothing. */
const SCHEMA = `CREATE TABLE IF NOT EXISTS state (id INTEGER PRIMARY KEY CHECK (id = 1), log TEXT NOT NULL,
    hour_start INTEGER NOT NULL, hour_count INTEGER NOT NULL, day_start INTEGER NOT NULL, day_count INTEGER NOT NULL,
    usage_hour TEXT NOT NULL, last_used INTEGER NOT NULL DEFAULT 0,
    reserved INTEGER NOT NULL DEFAULT 0, reserved_until INTEGER NOT NULL DEFAULT 0);
  CREATE TABLE IF NOT EXISTS key_state (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL);
  ${USAGE_SCHEMA}`;
/** The tables of an object made before blocks were reserved (issue 49), brought up to SCHEMA on its wake. */
const UPGRADE = `ALTER TABLE state ADD COLUMN reserved INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE state ADD COLUMN reserved_until INTEGER NOT NULL DEFAULT 0;
  ${USAGE_UPGRADE}`;

/**
 * What a wake reads in one statement: the state row (all null before the first decision), the key's state and the usage
 * log's oldest rows.
 */
type WokenRow = { [K in keyof StateRow]: StateRow[K] | null } & OldestColumns & { key_state: string | null };

const log = logger("api-key-object");

/** Storage key set while a usage.threshold notice could not be written: the alarm writes it again. */
const NOTICE_PENDING = "usage_notice_pending";
const NOTICE_RETRY_MS = 10_000;

/** Refusals change nothing but usage counts: written at most this often, so hammering a refused key cannot flood its object with writes. */
const REFUSALS_WRITTEN_EVERY_MS = 1_000;

/**
 * One object per API key, named by the key's hash (`idFromName`): the key's live record (status, expiry, plan limits,
 * restrictions, read from D1 once and then pushed to), its rate-limit windows and its usage. It decides admission and
 * counts in one round trip. Calls run one at a time, so the counts in memory are exact under concurrency. Storage
 * holds them by reservation (src/api-keys/object/reservations.ts): an admission no block covers writes, before it
 * answers, the counts and a block of admissions the key may still make; the block's others are answered from
 * memory. A wake counts the stored block as used, so no eviction admits extra. A write is one row (the minute log, the
 * hour and day counters, this hour's usage minute by minute, the block), plus one when an hour ends
 * (src/api-keys/object/usage-log.ts). Until wrangler.toml's v5 this class was `RateLimiter`, which held the fixed
 * buckets too; the rename kept every key's storage.
 */
export abstract class KeyObject extends MeteredObject {
  private readonly window: AdmissionWindow;
  private readonly usageLog: UsageLog;
  private readonly budgets = new KeyBudgets(this.ctx.storage.sql);
  private key: KeyState | undefined;
  private lastUseRecorded: number;
  private hasSchema: boolean;
  /** The key's latest D1 read not finished (queued or under way; see read()), and whether it has begun. */
  private pendingRead: { done: Promise<void>; begun: boolean } | undefined;
  /** Until when this key hash is known to match no key (memory only: nothing is stored for a made-up key). */
  private unknownUntil = 0;
  /** When the state row was last written: refusals since then are written once it is a second old. */
  private writtenAt = 0;
  private refusalsUnwritten = false;
  /** Whether decisions were counted since the state row was last written (a block's, or refusals). */
  private countsUnwritten = false;
  /** When the alarm is set for (undefined: not set by this instance, or run since). */
  private alarmAt: number | undefined;
  /** The day's count the usage thresholds were last looked at for: the stored one on a wake, before its block. */
  private noticed: Counter;
  /** Whether the state row exists (read at the wake, or written since). */
  private hasStateRow: boolean;
  /** A key change's pushes to its open streams, which the call that made the change waits for (answered). */
  private readonly pushes: Promise<unknown>[] = [];

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const sql = ctx.storage.sql;
    // A wake asks whether the tables exist, then reads everything the object keeps in memory in one statement.
    const [table] = sql.exec<{ sql: string }>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'state'").toArray();
    this.hasSchema = table !== undefined;
    if (table && !table.sql.includes("reserved")) sql.exec(UPGRADE);
    const woken: Partial<WokenRow> = this.hasSchema
      ? sql
          .exec<WokenRow>(
            `SELECT state.*, (SELECT state FROM key_state) AS key_state, ${OLDEST_COLUMNS} FROM (SELECT 1) LEFT JOIN state ON state.id = 1`,
          )
          .one()
      : {};
    const row = woken.log == null ? undefined : (woken as StateRow);
    this.hasStateRow = row !== undefined;
    const pending: PendingHour = row ? JSON.parse(row.usage_hour) : { start: 0, minutes: {} };
    this.usageLog = new UsageLog(sql, pending, { oldest_hour: woken.oldest_hour ?? null, oldest_day: woken.oldest_day ?? null });
    // What the stored block may have admitted is counted as admitted, and shown in usage as uncertain.
    this.noticed = { start: row?.day_start ?? 0, count: row?.day_count ?? 0 };
    const { window, assumed } = AdmissionWindow.woken(row, Date.now());
    this.window = window;
    if (assumed) this.usageLog.assume(assumed);
    this.lastUseRecorded = row?.last_used ?? 0;
    this.key = woken.key_state != null ? (JSON.parse(woken.key_state) as KeyState) : undefined;
  }

  /**
   * Admission for an API key: its status, expiry and limits come from D1 the first time, then from storage.
   * Every decision is counted in the key's usage. A hash that matches no key is remembered for a minute,
   * in memory only: no D1 read meanwhile, and no storage for a made-up key. With `lookUp: false`, an object that
   * would have to read D1 answers "unchecked" instead, counting nothing: the worker looks up a key it cannot vouch
   * for only while the client IP's bucket has room (src/pipeline/admission.ts).
   */
  async admitKey(keyHash: string, request?: KeyRequest, { lookUp = true } = {}): Promise<KeyAdmission & ObjectAnswer> {
    return this.reported(await this.admission(keyHash, request, lookUp));
  }

  private async admission(keyHash: string, request: KeyRequest | undefined, lookUp: boolean): Promise<KeyAdmission> {
    if (!lookUp && !this.key && Date.now() >= this.unknownUntil) return { status: "unchecked" };
    const key = await this.knownKey(keyHash);
    if (!key) return { status: "unknown" };
    const now = Date.now();
    if (key.status !== "active" || pastExpiry(key, now)) {
      this.count(now, false);
      return key.status === "active" ? { status: "expired", expiresAt: key.expiresAt! } : { status: key.status };
    }
    const forbidden = request && outsideRestrictions(key, request);
    if (forbidden) {
      // Refused, but not counted against the key's limits (the worker counts it in the client IP's bucket).
      this.count(now, false);
      return { status: "forbidden", reason: forbidden };
    }
    // A request of a route's budget (the whole list) is refused, counting nothing, once the budget is spent.
    const budget = request?.budget && this.budgets.left(request.budget, now);
    const { decision, opened } =
      budget?.remaining === 0 ? { decision: budgetSpent(budget, key.limits, now), opened: false } : this.window.decide(now, key.limits);
    if (decision.allowed) {
      this.markUse(key.keyId, now);
      this.noticeUsage(key.keyId, key.limits.per_day, now);
    }
    if (budget) decision.budget = decision.allowed ? this.budgets.spend(budget, now) : budget;
    this.count(now, decision.allowed, { blockOpened: opened });
    return { status: "active", keyId: key.keyId, accountId: key.accountId, decision, scopes: key.scopes };
  }

  /**
   * Whether the key would still be admitted for this request (not revoked, not expired, inside its address and scope
   * restrictions), counting nothing and writing nothing: for a connection admitted once that must end with its key
   * (an event stream). Revocations, expiries and restrictions are pushed here before the call that made them answers.
   */
  async stillAdmits(keyHash: string, request: KeyRequest): Promise<{ admits: boolean } & ObjectAnswer> {
    const key = await this.knownKey(keyHash);
    return this.reported({
      admits: key?.status === "active" && !pastExpiry(key, Date.now()) && outsideRestrictions(key, request) === undefined,
    });
  }

  /** Pushed by DELETE /api-keys/:id before it answers: the next request is refused. */
  revoke(keyId: string, accountId: string): Promise<ObjectAnswer> {
    this.storeKey({ status: "revoked", keyId, accountId });
    return this.answered();
  }

  /** Pushed by a rotation once D1 has committed it. Never extends: an earlier expiry the key already has stays. */
  async expire(keyHash: string, expiresAt: number): Promise<ObjectAnswer> {
    const key = await this.knownKey(keyHash);
    if (key?.status === "active") {
      this.storeKey({ ...key, expiresAt: key.expiresAt === null ? expiresAt : Math.min(key.expiresAt, expiresAt) });
    }
    return this.answered();
  }

  /**
   * Pushed by a plan change once D1 has it: the next request gets the new limits. A push that lands while a D1 read
   * is under way (which may have read the old plan) waits for that read and applies on top.
   */
  async setLimits(limits: Limits): Promise<ObjectAnswer> {
    await this.pendingRead?.done.catch(() => undefined);
    if (this.key?.status === "active") this.storeKey({ ...this.key, limits });
    return this.answered();
  }

  /**
   * Pushed by PATCH /api-keys/:id once D1 has the key's new restrictions, and by the cron for a plan change whose push
   * could not reach this object: the object reads the key from D1 itself, after any read under way, so however
   * concurrent pushes interleave, the last read is of D1's last write and the next request is decided by what D1
   * holds.
   */
  async refresh(keyHash: string): Promise<ObjectAnswer> {
    if (this.key?.status !== "revoked") await this.read(keyHash, { beginningNow: true });
    return this.answered();
  }

  /** The key's usage in the span. */
  usageBuckets({ granularity, from, to }: UsageSpan): { buckets: UsageCount[] } & ObjectAnswer {
    return this.reported({ buckets: this.hasSchema ? this.usageLog.read(granularity, from, to) : [] });
  }

  /** A change's answer, once its pushes to the key's streams are made: their work is the caller's, as the change is. */
  /**
   * Hears of a change to the key it holds: the event streams' hubs (src/stream/stub.ts), wired by the worker's entry
   * (src/index.ts, ApiKeyObject), so this folder names no stream.
   */
  protected abstract keyChanged(state: KeyState): Promise<ObjectAnswer>;

  private async answered(): Promise<ObjectAnswer> {
    await Promise.all(this.pushes.splice(0));
    return this.reported({});
  }

  /** The key's state. The first call reads D1 (and, for a hash that matched no key, one call a minute), once for all concurrent callers. */
  private async knownKey(keyHash: string): Promise<KeyState | undefined> {
    if (this.key || Date.now() < this.unknownUntil) return this.key;
    await this.read(keyHash, { beginningNow: false });
    return this.key;
  }

  /**
   * One read of the key in D1, begun after the reads before it have been applied, so the last read begun is the last
   * applied. A caller shares the pending read when it may: a request, any; a push (`beginningNow`), only one not begun
   * yet, since one under way may have read D1 before the push's write.
   */
  private async read(keyHash: string, { beginningNow }: { beginningNow: boolean }): Promise<void> {
    const pending = this.pendingRead;
    if (pending && !(beginningNow && pending.begun)) return pending.done;
    const read = { begun: false, done: Promise.resolve() };
    read.done = (pending?.done.catch(() => undefined) ?? Promise.resolve()).then(async () => {
      read.begun = true;
      try {
        await this.load(keyHash);
      } finally {
        if (this.pendingRead === read) this.pendingRead = undefined;
      }
    });
    this.pendingRead = read;
    await read.done;
  }

  private async load(keyHash: string) {
    const found = await loadKeyState(this.meter.database(this.env.DB), keyHash);
    if (!found) {
      if (!this.key) this.unknownUntil = Date.now() + UNKNOWN_KEY_MS;
      return;
    }
    this.storeKey(withPushes(this.key, found));
  }

  /**
   * Writes the refusals counted since the last write (see count()); once the block has ended, what it admitted and
   * left unused, so a key gone quiet keeps exact counts through its eviction; and a usage.threshold notice that failed.
   */
  override alarm(): Promise<void> {
    return this.invocation("api_key_object_alarm", async () => {
      this.alarmAt = undefined;
      const now = Date.now();
      // A block still in use is written with the next one, or by this alarm again once it has ended.
      const release = this.window.releaseAt(now);
      if (release !== undefined) this.setAlarm(release);
      if (this.refusalsUnwritten || (release === undefined && this.countsUnwritten)) this.persist(now);
      if (this.key?.status !== "active" || !(await this.ctx.storage.get(NOTICE_PENDING))) return;
      // Every threshold the counted day reached, again: their ids make a notice already written a no-op. Throwing retries the alarm.
      const { start, count } = this.window.usage.day;
      const { keyId, limits } = this.key;
      const perDay = limits.per_day;
      const at = new Date().toISOString();
      const notices = thresholdsCrossed(0, count, perDay).map((threshold) => ({ keyId, dayStart: start, perDay, threshold, at }));
      await announceUsage(this.meter.database(this.env.DB), notices);
      await this.ctx.storage.delete(NOTICE_PENDING);
    });
  }

  /**
   * usage.threshold (src/api-keys/object/usage-threshold.ts): only the admission that reaches 80 % or 100 % of the
   * day's quota writes anything, off the request path (an invocation of its own); should that fail, a stored flag and
   * the alarm write it again. The day's count goes up by one per admission, or by a block at a wake (the admission
   * after it announces what the block passed).
   */
  private noticeUsage(keyId: string, perDay: number, now: number) {
    const { day } = this.window.usage;
    const before = this.noticed.start === day.start ? this.noticed.count : 0;
    this.noticed = { ...day };
    const at = new Date(now).toISOString();
    const notices = thresholdsCrossed(before, day.count, perDay).map((threshold) => ({
      keyId,
      dayStart: day.start,
      perDay,
      threshold,
      at,
    }));
    if (notices.length === 0) return;
    const written = () =>
      announceUsage(this.meter.database(this.env.DB), notices).catch(async (error: unknown) => {
        const thresholds = notices.map((notice) => notice.threshold);
        log.error("usage.threshold not written; the alarm retries", { key_id: keyId, thresholds, error: String(error) });
        await this.ctx.storage.put(NOTICE_PENDING, true);
        this.setAlarm(Date.now() + NOTICE_RETRY_MS);
      });
    this.ctx.waitUntil(this.invocation("usage_threshold_notice", written));
  }

  /**
   * Marks a use for `last_used_at` at most every MARK_EVERY_MS, handed to its shard off the request path
   * (src/api-keys/object/last-used.ts): the key's periodic work, an invocation of its own (docs/costs.json prices it).
   */
  private markUse(keyId: string, now: number) {
    if (now - this.lastUseRecorded < MARK_EVERY_MS) return;
    const previous = this.lastUseRecorded;
    this.lastUseRecorded = now;
    const hand = () =>
      this.meter
        .called(lastUsedLog(this.env, keyId).note(keyId, new Date(now).toISOString()))
        // Should the shard not take it, the next use marks again.
        .catch(() => (this.lastUseRecorded = previous));
    this.ctx.waitUntil(this.invocation("last_used_mark", hand));
  }

  private storeKey(state: KeyState) {
    // A change to a key already held reaches its open event streams; a first read is no change.
    if (this.key) this.pushes.push(this.meter.called(this.keyChanged(state)));
    this.key = state;
    this.ensureSchema();
    this.ctx.storage.sql.exec("INSERT OR REPLACE INTO key_state (id, state) VALUES (1, ?)", JSON.stringify(state));
  }

  /**
   * Counts a key's decision. An admission that opened a block is written with it before the answer leaves; the
   * block's others are in it already. A refusal within a second of the last write is written by an alarm at that
   * second's end (or by an earlier write), so none is lost to eviction. A decision that ends an hour writes the
   * state row with the hour's row, so the hour is never in both.
   */
  private count(now: number, allowed: boolean, { blockOpened = false } = {}) {
    this.ensureSchema();
    const hourEnded = this.usageLog.record(now, allowed);
    this.countsUnwritten = true;
    if (blockOpened || hourEnded || (!allowed && now - this.writtenAt >= REFUSALS_WRITTEN_EVERY_MS)) this.persist(now);
    else if (!allowed) {
      this.refusalsUnwritten = true;
      this.setAlarm(this.writtenAt + REFUSALS_WRITTEN_EVERY_MS);
    }
    const release = blockOpened ? this.window.releaseAt(now) : undefined;
    if (release !== undefined) this.setAlarm(release);
  }

  /** Sets the alarm for `at`, unless it is set sooner already (the alarm sets itself again for what is still due). */
  private setAlarm(at: number) {
    if (this.alarmAt !== undefined && this.alarmAt <= at) return;
    this.alarmAt = at;
    void this.ctx.storage.setAlarm(at);
  }

  private ensureSchema() {
    if (this.hasSchema) return;
    this.ctx.storage.sql.exec(SCHEMA);
    this.hasSchema = true;
  }

  private persist(now: number) {
    this.ensureSchema();
    this.writtenAt = now;
    this.refusalsUnwritten = false;
    this.countsUnwritten = false;
    const { minuteLog, hour, day } = this.window.usage;
    const { reserved, reserved_until } = this.window.stored(now);
    this.ctx.storage.sql.exec(
      this.hasStateRow ? UPDATE_STATE : WRITE_STATE,
      JSON.stringify(minuteLog),
      hour.start,
      hour.count,
      day.start,
      day.count,
      JSON.stringify(this.usageLog.pending),
      this.lastUseRecorded,
      reserved,
      reserved_until,
    );
    this.hasStateRow = true;
  }
}
