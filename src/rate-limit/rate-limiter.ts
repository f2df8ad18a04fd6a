import { DurableObject } from "cloudflare:workers";
import { database } from "../platform/db.ts";
import { loadKeyState, recordKeyUse } from "./key-store.ts";
import type { Decision, KeyAdmission, KeyState, Limits } from "./types.ts";
import { MINUTE_MS, Usage } from "./window.ts";

/**
 * One object per bucket: an API key (named by its hash), an account, an admin subject or a client IP.
 * It decides admission and counts in one round trip. Calls run one at a time and the counters are in
 * its SQLite storage, written before the answer leaves, so neither concurrency nor eviction admits extra.
 */
export class RateLimiter extends DurableObject<Env> {
  private readonly usage: Usage;
  private key: KeyState | undefined;
  private lastUseRecorded = 0;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const sql = ctx.storage.sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS minute_log (at INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS counters (period TEXT PRIMARY KEY, start INTEGER NOT NULL, count INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS key_state (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL);`);
    const log = sql.exec<{ at: number }>("SELECT at FROM minute_log ORDER BY at").toArray().map((r) => r.at);
    const counters = new Map(sql.exec<{ period: string; start: number; count: number }>("SELECT * FROM counters").toArray().map((r) => [r.period, r]));
    this.usage = new Usage(log, counters.get("hour"), counters.get("day"));
    const stored = sql.exec<{ state: string }>("SELECT state FROM key_state").toArray()[0];
    this.key = stored ? (JSON.parse(stored.state) as KeyState) : undefined;
  }

  /** Admission for a bucket whose limits the caller knows (account, admin subject, client IP). */
  admit(limits: Limits): Decision {
    return this.count(limits);
  }

  /** Admission for an API key: its status and limits come from D1 the first time, then from storage. */
  async admitKey(keyHash: string): Promise<KeyAdmission> {
    let d1Queries = 0;
    if (!this.key) {
      d1Queries = 1;
      const found = await loadKeyState(database(this.env.DB), keyHash);
      // A revoke or plan push may have landed while D1 answered; what it stored wins.
      if (!this.key) {
        if (!found) return { status: "unknown", d1Queries };
        this.storeKey(found);
      }
    }
    const key = this.key!;
    if (key.status !== "active") return { status: key.status, d1Queries };
    const decision = this.count(key.limits);
    if (decision.allowed) this.scheduleLastUsed();
    return { status: "active", keyId: key.keyId, accountId: key.accountId, decision, d1Queries };
  }

  /** Pushed by DELETE /api-keys/:id before it answers: the next request is refused. */
  revoke(keyId: string, accountId: string): void {
    this.storeKey({ status: "revoked", keyId, accountId });
  }

  /** Pushed by a plan change before it answers: the next request gets the new limits. */
  setLimits(limits: Limits): void {
    if (this.key?.status === "active") this.storeKey({ ...this.key, limits });
  }

  /** `last_used_at` is written to D1 at most once a minute, off the request path. */
  override async alarm(): Promise<void> {
    if (this.key) await recordKeyUse(database(this.env.DB), this.key.keyId, new Date(this.lastUseRecorded).toISOString());
  }

  private scheduleLastUsed() {
    const now = Date.now();
    if (now - this.lastUseRecorded < MINUTE_MS) return;
    this.lastUseRecorded = now;
    void this.ctx.storage.setAlarm(now);
  }

  private storeKey(state: KeyState) {
    this.key = state;
    this.ctx.storage.sql.exec("INSERT OR REPLACE INTO key_state (id, state) VALUES (1, ?)", JSON.stringify(state));
  }

  private count(limits: Limits): Decision {
    const now = Date.now();
    const sql = this.ctx.storage.sql;
    if (this.usage.slide(now) > 0) sql.exec("DELETE FROM minute_log WHERE at <= ?", now - MINUTE_MS);
    const decision = this.usage.decide(now, limits);
    if (decision.allowed) {
      sql.exec("INSERT INTO minute_log (at) VALUES (?)", now);
      for (const [period, counter] of [["hour", this.usage.hour], ["day", this.usage.day]] as const) {
        sql.exec("INSERT OR REPLACE INTO counters (period, start, count) VALUES (?, ?, ?)", period, counter.start, counter.count);
      }
    }
    return decision;
  }
}
