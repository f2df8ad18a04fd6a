import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ArchivedHistoryRow } from "../catalogue/history-archive.ts";
import type { ArchivedEvent } from "../events/archive.ts";
import type { EventMessage } from "../events/messages.ts";
import { outboxRows } from "../events/outbox-rows.ts";
import { ApiError } from "../http/errors.ts";
import type { TouchedRows } from "../observations/changes.ts";
import type { IngestionResult, Observation } from "../observations/schema.ts";
import { type IngestionTarget, ingestObservations } from "../observations/service.ts";
import type { ObjectAnswer } from "../platform/metered.ts";
import { MeteredObject } from "../platform/metered-object.ts";
import { DAY_MS } from "../platform/time.ts";
import { type SandboxBase, sandboxBase } from "./catalogue.ts";
import { keepingOfferTerms } from "./offer-terms.ts";
import { mergedOffers, type OverlayRow, type ProductState, productState } from "./overlay.ts";
import { SANDBOX_RETENTION_MS } from "./retention.ts";

/**
 * One object per account (idFromName(account id)): its sandbox's own data, in the object's SQLite, never in the shared
 * D1 (docs/architecture.md, "Test mode"). Beside the generated base every account shares (src/sandbox/catalogue.ts),
 * it holds the products the account changed (`products`, each stored whole as the overlay reads it), the price and
 * stock changes it made (`history`) and the events they emitted (`events`, numbered by `seq` in commit order: the
 * feed's order and its cursors). An account's sandbox traffic therefore writes to its own object alone, and no other
 * account's reads, live or sandbox, pass its rows. Everything is kept SANDBOX_RETENTION_MS (7 days): a daily alarm
 * deletes what is older, a product the account last changed then included (it returns to the base's).
 */

export interface SandboxHistoryQuery {
  from?: string | undefined;
  to?: string | undefined;
  competitor?: string | null | undefined;
  limit?: number | undefined;
}

/** A page of the sandbox's events: after the cursor (`after`, an event id) or from `since`, up to `until`, of `types`. */
export interface SandboxEventsQuery {
  after?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
  types?: readonly string[] | undefined;
  limit: number;
  newestFirst?: boolean | undefined;
}

/** An ingestion's outcome: what it changed and the events it emitted, or why it was refused. */
export type SandboxIngestion =
  | { result: IngestionResult; events: EventMessage[] }
  | { refused: { status: ContentfulStatusCode; detail: string; headers: Record<string, string> } };

const SCHEMA = [
  "CREATE TABLE IF NOT EXISTS products (product_id TEXT PRIMARY KEY, version INTEGER NOT NULL, changed_at TEXT NOT NULL, state TEXT NOT NULL) WITHOUT ROWID",
  `CREATE TABLE IF NOT EXISTS history (id INTEGER PRIMARY KEY, product_id TEXT NOT NULL, competitor_id TEXT NOT NULL,
    price_minor INTEGER NOT NULL, currency TEXT NOT NULL, in_stock INTEGER NOT NULL, observed_at TEXT NOT NULL)`,
  "CREATE INDEX IF NOT EXISTS history_product ON history (product_id, observed_at)",
  `CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, timestamp TEXT NOT NULL,
    payload TEXT NOT NULL, old_minor INTEGER, new_minor INTEGER)`,
  "CREATE INDEX IF NOT EXISTS events_timestamp ON events (timestamp)",
];

const iso = (ms: number) => new Date(ms).toISOString();

export class SandboxObject extends MeteredObject {
  /** Whether the retention's alarm is known to be set (in memory: an object started afresh looks once). */
  private alarmSet = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    for (const statement of SCHEMA) ctx.storage.sql.exec(statement);
  }

  /**
   * POST /test/observations: the observations applied as an ingestion applies them to the catalogue (the same steps,
   * rules and answer: src/observations/service.ts), with this object as its target. The events carry the account. A
   * refusal (an ApiError: a 400 naming the observation) comes back as a value: an error thrown across RPC keeps only
   * its message. Unlike a live ingestion, an observation keeps the offer terms it leaves out (src/sandbox/offer-terms.ts).
   */
  async ingest(accountId: string, observations: readonly Observation[]): Promise<SandboxIngestion & ObjectAnswer> {
    if (!this.alarmSet) {
      this.alarmSet = true;
      if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + DAY_MS);
    }
    let events: readonly EventMessage[] = [];
    try {
      const base = sandboxBase();
      const { offers } = this.touched(base, observations);
      const offerOf = (sku: string, competitorId: string) => {
        const productId = base.products[base.bySku.get(sku)!]!.id;
        return offers.find((offer) => offer.productId === productId && offer.competitorId === competitorId);
      };
      const result = await ingestObservations(this.ingestionTarget(accountId), {
        observations: keepingOfferTerms(observations, offerOf),
        afterCommit: (committed) => {
          events = committed;
        },
      });
      return this.reported({ result, events: [...events] });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      return this.reported({ refused: { status: error.status, detail: error.detail, headers: error.headers } });
    }
  }

  /** The products the account changed: those named, or every one (a list). */
  overlay(productIds?: readonly string[]): { rows: { product_id: string; version: number; state: string }[] } & ObjectAnswer {
    const rows = this.overlayRows(productIds);
    return this.reported({ rows });
  }

  /** The account's own history rows of these products, oldest first: within [from, to), of one shop when named. */
  history(productIds: readonly string[], { from = "", to = "9", competitor = null, limit = -1 }: SandboxHistoryQuery = {}) {
    const rows = this.ctx.storage.sql
      .exec<{
        id: number;
        productId: string;
        competitorId: string;
        priceMinor: number;
        currency: string;
        inStock: number;
        observedAt: string;
      }>(
        `SELECT id, product_id AS productId, competitor_id AS competitorId, price_minor AS priceMinor, currency, in_stock AS inStock,
           observed_at AS observedAt
         FROM history WHERE product_id IN (SELECT value FROM json_each(?)) AND observed_at >= ? AND observed_at < ?
           AND (? IS NULL OR competitor_id = ?)
         ORDER BY observed_at, id LIMIT ?`,
        JSON.stringify(productIds),
        from,
        to,
        competitor,
        competitor,
        limit,
      )
      .toArray()
      .map((row): ArchivedHistoryRow & { productId: string } => ({ ...row, inStock: Boolean(row.inStock) }));
    return this.reported({ rows });
  }

  /** The bodies of these events, those it still keeps (a test webhook's delivery log shows what each attempt sent). */
  payloads(ids: readonly string[]): { rows: { id: string; payload: string }[] } & ObjectAnswer {
    const rows = this.ctx.storage.sql
      .exec<{ id: string; payload: string }>(
        "SELECT id, payload FROM events WHERE id IN (SELECT value FROM json_each(?))",
        JSON.stringify(ids),
      )
      .toArray();
    return this.reported({ rows });
  }

  /** A page of the events, in commit order (or newest first); `gone`: the cursor names no event kept. */
  events({
    after,
    since,
    until = "9",
    types,
    limit,
    newestFirst = false,
  }: SandboxEventsQuery): { rows: ArchivedEvent[]; gone: boolean } & ObjectAnswer {
    const sql = this.ctx.storage.sql;
    const oldest = iso(Date.now() - SANDBOX_RETENTION_MS);
    let cursor: number | null = null;
    if (after !== undefined) {
      const [found] = sql.exec<{ seq: number }>("SELECT seq FROM events WHERE id = ? AND timestamp >= ?", after, oldest).toArray();
      if (!found) return this.reported({ rows: [], gone: true });
      cursor = found.seq;
    }
    const rows = sql
      .exec<ArchivedEvent>(
        `SELECT seq, id, type, timestamp, payload, old_minor AS oldMinor, new_minor AS newMinor FROM events
         WHERE (? IS NULL OR seq ${newestFirst ? "<" : ">"} ?) AND timestamp >= ? AND timestamp < ?
           AND (? IS NULL OR type IN (SELECT value FROM json_each(?)))
         ORDER BY seq ${newestFirst ? "DESC" : "ASC"} LIMIT ?`,
        cursor,
        cursor,
        since !== undefined && since > oldest ? since : oldest,
        until,
        types === undefined ? null : 1,
        JSON.stringify(types ?? []),
        limit,
      )
      .toArray();
    return this.reported({ rows, gone: false });
  }

  /** The retention, once a day while the object holds anything: an invocation of its own (`sandbox_retention`). */
  override alarm(): Promise<void> {
    return this.invocation("sandbox_retention", async () => {
      const sql = this.ctx.storage.sql;
      const cutoff = iso(Date.now() - SANDBOX_RETENTION_MS);
      sql.exec("DELETE FROM products WHERE changed_at < ?", cutoff);
      sql.exec("DELETE FROM history WHERE observed_at < ?", cutoff);
      sql.exec("DELETE FROM events WHERE timestamp < ?", cutoff);
      const [held] = sql
        .exec<{ held: number }>(
          "SELECT EXISTS (SELECT 1 FROM products) OR EXISTS (SELECT 1 FROM history) OR EXISTS (SELECT 1 FROM events) AS held",
        )
        .toArray();
      this.alarmSet = Boolean(held?.held);
      if (this.alarmSet) await this.ctx.storage.setAlarm(Date.now() + DAY_MS);
    });
  }

  private overlayRows(productIds?: readonly string[]) {
    const named = productIds === undefined ? "" : " WHERE product_id IN (SELECT value FROM json_each(?))";
    const bindings = productIds === undefined ? [] : [JSON.stringify(productIds)];
    return this.ctx.storage.sql
      .exec<{ product_id: string; version: number; state: string }>(`SELECT product_id, version, state FROM products${named}`, ...bindings)
      .toArray();
  }

  /** What the observations touch, as the account sees it, and the account's own rows of those products (`stored`). */
  private touched(base: SandboxBase, observations: readonly Observation[]): TouchedRows & { stored: Map<string, OverlayRow> } {
    const ids = [...new Set(observations.map((o) => base.products[base.bySku.get(o.sku)!]!.id))];
    const stored = new Map(
      this.overlayRows(ids).map((row) => [row.product_id, { version: row.version, ...(JSON.parse(row.state) as ProductState) }]),
    );
    const states = ids.map((id) => productState(base, stored, base.byId.get(id)!));
    const shops = new Set(observations.map((o) => o.competitor.id));
    return {
      products: states.map((state) => state.product),
      offers: states.flatMap((state) => state.offers),
      competitors: base.competitors.filter((c) => shops.has(c.id)),
      stored,
    };
  }

  /**
   * The ingestion's target. No guard as the live target's: the object runs one call at a time, and its read and write
   * make no I/O between them (its storage is synchronous), so nothing can change what was read before it is written.
   * The write is one transaction.
   */
  private ingestionTarget(accountId: string): IngestionTarget {
    const base = sandboxBase();
    let stored = new Map<string, OverlayRow>();
    return {
      read: async (observations) => {
        const touched = this.touched(base, observations);
        stored = touched.stored;
        return touched;
      },
      write: async (touched, changes) => {
        for (const message of changes.events) message.sandbox_account_id = accountId;
        const now = new Date().toISOString();
        const touchedIds = new Set([...changes.products.map((p) => p.id), ...changes.offers.map((o) => o.productId)]);
        const products = [...touchedIds].map((id) => {
          const product = changes.products.find((p) => p.id === id) ?? touched.products.find((p) => p.id === id)!;
          const changed = changes.offers.filter((offer) => offer.productId === id);
          const state: ProductState = { product, offers: mergedOffers(stored.get(id)?.offers ?? [], changed) };
          return [id, (stored.get(id)?.version ?? 0) + 1, JSON.stringify(state)];
        });
        const sql = this.ctx.storage.sql;
        this.ctx.storage.transactionSync(() => {
          sql.exec(
            `INSERT INTO products (product_id, version, changed_at, state)
             SELECT value ->> 0, value ->> 1, ?, value ->> 2 FROM json_each(?) WHERE true
             ON CONFLICT (product_id) DO UPDATE SET version = excluded.version, changed_at = excluded.changed_at, state = excluded.state`,
            now,
            JSON.stringify(products),
          );
          if (changes.history.length > 0)
            sql.exec(
              `INSERT INTO history (product_id, competitor_id, price_minor, currency, in_stock, observed_at)
               SELECT value ->> 'productId', value ->> 'competitorId', value ->> 'priceMinor', value ->> 'currency', value ->> 'inStock',
                 value ->> 'observedAt' FROM json_each(?)`,
              JSON.stringify(changes.history),
            );
          if (changes.events.length > 0)
            sql.exec(
              `INSERT INTO events (id, type, timestamp, payload, old_minor, new_minor)
               SELECT value ->> 'id', value ->> 'type', value ->> 'timestamp', value ->> 'payload', value ->> 'oldMinor', value ->> 'newMinor'
               FROM json_each(?)`,
              JSON.stringify(outboxRows(changes.events, now)),
            );
        });
      },
      committed: async () => {},
    };
  }
}
