import { DurableObject } from "cloudflare:workers";
import { database } from "../platform/db.ts";
import { loadKeyState, recordKeyUse } from "./key-store.ts";
import type { Decision, Granularity, KeyAdmission, KeyState, Limits, ShortCircuited, UsageCount } from "./types.ts";
import { OLDEST_COLUMNS, USAGE_SCHEMA, UsageLog, type OldestColumns } from "./usage-log.ts";
import { MINUTE_MS, Usage } from "./window.ts";

/** The one row that holds a bucket's counters: written once per decision, read once per wake. */
interface StateRow extends Record<string, SqlStorageValue> {
  log: string;
  hour_start: number;
  hour_count: number;
  day_start: number;
  day_count: number;
  usage_minute: number;
  usage_admitted: number;
  usage_refused: number;
  /** When `last_used_at` was last scheduled for D1: kept, so a woken object does not write it again within the minute. */
  last_used: number;
}

/** Writes the whole state row: one statement per decision, and once when older storage is read in. */
const WRITE_STATE = "INSERT OR REPLACE INTO state VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/** What a wake reads in one statement: the state row (all null before the first decision), the key's state and the usage log's oldest rows. */
type WokenRow = { [K in keyof StateRow]: StateRow[K] | null } & OldestColumns & { key_state: string | null };

/**
 * One object per bucket: an API key (named by its hash), an account, an admin subject or a client IP.
 * It decides admission and counts in one round trip. Calls run one at a time and the counters are in
 * its SQLite storage, written before the answer leaves, so neither concurrency nor eviction admits extra.
 * All of a decision's counting (the minute log, the hour and day counters, this minute's usage) is one
 * row, written with one statement: a storage write is what an admission costs most, here and deployed.
 */
export class RateLimiter extends DurableObject<Env> {
  private readonly usage: Usage;
  private readonly usageLog: UsageLog;
  private key: KeyState | undefined;
  private lastUseRecorded: number;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const sql = ctx.storage.sql;
    // A wake costs two statements: the schema, and one read of everything the object keeps in memory.
    sql.exec(`CREATE TABLE IF NOT EXISTS state (id INTEGER PRIMARY KEY CHECK (id = 1), log TEXT NOT NULL,
        hour_start INTEGER NOT NULL, hour_count INTEGER NOT NULL, day_start INTEGER NOT NULL, day_count INTEGER NOT NULL,
        usage_minute INTEGER NOT NULL, usage_admitted INTEGER NOT NULL, usage_refused INTEGER NOT NULL, last_used INTEGER NOT NULL DEFAULT 0);
      CREATE TABLE IF NOT EXISTS key_state (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL);
      ${USAGE_SCHEMA}`);
    const woken = sql
      .exec<WokenRow>(
        `SELECT state.*, (SELECT state FROM key_state) AS key_state, ${OLDEST_COLUMNS} FROM (SELECT 1) LEFT JOIN state ON state.id = 1`,
      )
      .one();
    // A state table from before `last_used` (a column of the query even without a row) gets it, once.
    if (!("last_used" in woken)) sql.exec("ALTER TABLE state ADD COLUMN last_used INTEGER NOT NULL DEFAULT 0");
    const row = woken.log === null ? fromPerRowTables(sql) : (woken as StateRow);
    this.usage = row
      ? new Usage(JSON.parse(row.log) as number[], { start: row.hour_start, count: row.hour_count }, { start: row.day_start, count: row.day_count })
      : new Usage();
    const pending = row ? { minute: row.usage_minute, admitted: row.usage_admitted, refused: row.usage_refused } : { minute: 0, admitted: 0, refused: 0 };
    this.usageLog = new UsageLog(sql, pending, woken);
    this.lastUseRecorded = row?.last_used ?? 0;
    // States stored before keys could expire have no `expiresAt`: they never expire.
    this.key = woken.key_state !== null ? ({ expiresAt: null, ...JSON.parse(woken.key_state) } as KeyState) : undefined;
  }

  /** Admission for a bucket whose limits the caller knows (account, admin subject, client IP). */
  admit(limits: Limits): Decision {
    const now = Date.now();
    const slid = this.usage.slide(now);
    const decision = this.usage.decide(now, limits);
    if (decision.allowed || slid > 0) this.persist(); // a refusal changes nothing to keep
    return decision;
  }

  /**
   * Admission for an API key: its status, expiry and limits come from D1 the first time, then from storage.
   * Every decision is counted in the key's usage, with the refusals the caller's isolate answered for it since.
   */
  async admitKey(keyHash: string, shortCircuited: ShortCircuited = []): Promise<KeyAdmission> {
    const d1Queries = this.key ? 0 : 1;
    const key = await this.knownKey(keyHash);
    if (!key) return { status: "unknown", d1Queries };
    const now = Date.now();
    if (key.status !== "active" || (key.expiresAt !== null && now >= key.expiresAt)) {
      this.usageLog.record(now, false, shortCircuited);
      this.persist();
      return key.status === "active" ? { status: "expired", expiresAt: key.expiresAt!, d1Queries } : { status: key.status, d1Queries };
    }
    this.usage.slide(now);
    const decision = this.usage.decide(now, key.limits);
    this.usageLog.record(now, decision.allowed, shortCircuited);
    if (decision.allowed) this.scheduleLastUsed(now);
    this.persist();
    return { status: "active", keyId: key.keyId, accountId: key.accountId, expiresAt: key.expiresAt, decision, d1Queries };
  }

  /** Pushed by DELETE /api-keys/:id before it answers: the next request is refused. */
  revoke(keyId: string, accountId: string): void {
    this.storeKey({ status: "revoked", keyId, accountId });
  }

  /** Pushed by a rotation before it answers. Never extends: an earlier expiry the key already has stays. */
  async expire(keyHash: string, expiresAt: number): Promise<void> {
    const key = await this.knownKey(keyHash);
    if (key?.status !== "active") return;
    this.storeKey({ ...key, expiresAt: key.expiresAt === null ? expiresAt : Math.min(key.expiresAt, expiresAt) });
  }

  /** The key's usage, `from` ≤ bucket start < `to`; refusals an isolate still held for it are counted first. */
  usageBuckets(granularity: Granularity, from: number, to: number, shortCircuited: ShortCircuited = []): UsageCount[] {
    for (const [minute, refused] of shortCircuited) this.usageLog.recordRefusals(minute, refused);
    if (shortCircuited.length > 0) this.persist();
    return this.usageLog.read(granularity, from, to);
  }

  /** Pushed by a plan change before it answers: the next request gets the new limits. */
  setLimits(limits: Limits): void {
    if (this.key?.status === "active") this.storeKey({ ...this.key, limits });
  }

  private async knownKey(keyHash: string): Promise<KeyState | undefined> {
    if (this.key) return this.key;
    const found = await loadKeyState(database(this.env.DB), keyHash);
    // A revoke, expiry or plan push may have landed while D1 answered; what it stored wins.
    if (!this.key && found) this.storeKey(found);
    return this.key;
  }

  /** `last_used_at` is written to D1 at most once a minute (across evictions too), off the request path. */
  override async alarm(): Promise<void> {
    if (this.key) await recordKeyUse(database(this.env.DB), this.key.keyId, new Date(this.lastUseRecorded).toISOString());
  }

  private scheduleLastUsed(now: number) {
    if (now - this.lastUseRecorded < MINUTE_MS) return;
    this.lastUseRecorded = now;
    void this.ctx.storage.setAlarm(now);
  }

  private storeKey(state: KeyState) {
    this.key = state;
    this.ctx.storage.sql.exec("INSERT OR REPLACE INTO key_state (id, state) VALUES (1, ?)", JSON.stringify(state));
  }

  private persist() {
    const { minuteLog, hour, day } = this.usage;
    const { minute, admitted, refused } = this.usageLog.pending;
    this.ctx.storage.sql.exec(
      WRITE_STATE,
      JSON.stringify(minuteLog),
      hour.start,
      hour.count,
      day.start,
      day.count,
      minute,
      admitted,
      refused,
      this.lastUseRecorded,
    );
  }
}

/**
 * Storage written before the one-row state (a row per admitted request in minute_log, a row per
 * period in counters): read once into the new row and dropped, so a deploy hands out nothing twice.
 */
function fromPerRowTables(sql: SqlStorage): StateRow | undefined {
  const old = sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('minute_log', 'counters')").toArray();
  if (old.length < 2) return undefined;
  const log = sql.exec<{ at: number }>("SELECT at FROM minute_log ORDER BY at").toArray().map((r) => r.at);
  const counters = new Map(sql.exec<{ period: string; start: number; count: number }>("SELECT * FROM counters").toArray().map((r) => [r.period, r]));
  const row: StateRow = {
    log: JSON.stringify(log),
    hour_start: counters.get("hour")?.start ?? 0,
    hour_count: counters.get("hour")?.count ?? 0,
    day_start: counters.get("day")?.start ?? 0,
    day_count: counters.get("day")?.count ?? 0,
    usage_minute: 0,
    usage_admitted: 0,
    usage_refused: 0,
    last_used: 0,
  };
  sql.exec(WRITE_STATE, ...Object.values(row));
  sql.exec("DROP TABLE minute_log; DROP TABLE counters;");
  return row;
}
