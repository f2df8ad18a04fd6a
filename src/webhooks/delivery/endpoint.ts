import { type DeliveryMessage, sendAll } from "../../events/messages.ts";
import { readConfig } from "../../platform/config.ts";
import { MAX_OPEN_CONNECTIONS } from "../../platform/connections.ts";
import type { Database } from "../../platform/db.ts";
import { logger } from "../../platform/log.ts";
import type { ObjectAnswer } from "../../platform/metered.ts";
import { MeteredObject } from "../../platform/metered-object.ts";
import { DAY_MS } from "../../platform/time.ts";
import type { WebhookRow } from "../service.ts";
import { type Attempted, attemptDelivery, attemptNotSent } from "./attempt.ts";
import { FAILING_DAYS_TO_DISABLE, type NewDelivery, recordAttempts, webhooksByIds } from "./rows.ts";
import { retryDelaySeconds } from "./schedule.ts";

/**
 * One object per webhook (named by its id): where that webhook's deliveries are made when the invocation that has
 * them cannot risk its connections on them (docs/webhooks.md "A failing receiver delays only itself"). An
 * invocation holds at most 6 outgoing connections, and an endpoint that hangs holds one for its whole timeout; so
 * the ingestion's first delivery, which does not know which endpoints hang, and the queue consumer, for endpoints
 * that are failing, hand deliveries over here (one short call that stores them) and go on. Each object then holds
 * only its own endpoint's connections, in its own alarm.
 *
 * The endpoint's state is its webhook's `failing_since` in D1 (set by a failure, cleared by a success; the
 * consumer reads the same column to decide). Not failing: up to 6 attempts at once, 15 s each. Failing: one
 * attempt at a time, a probe, with PROBE_TIMEOUT_MS; when the probe gets no answer at all (it timed out, or could
 * not connect), the deliveries that waited behind it are not sent but recorded as such and retried on the schedule,
 * so a dead endpoint holds one connection at a time however many deliveries it has, and each delivery keeps its
 * place in the schedule. A probe's success makes the endpoint healthy again. Each attempt is recorded like the
 * consumer's (`recordAttempts`), a run's together while they leave the endpoint's state as it was (a failing
 * endpoint's run is a few D1 statements, not a few per probe); a failed one goes back to WEBHOOK_QUEUE with the schedule's delay and its count
 * (`attempts_before`), so the queue stays the one timer of retries, and the consumer hands it back here when due.
 */

/** Pending deliveries read per round: those not sent cost no connection, so a round may take many. */
const ROUND_ROWS = 100;
/**
 * A run's bounds (an alarm has 15 minutes of wall time): what is left waits for the next run, at once. A run records
 * its attempts at its end, so these are also what a run that fails before then makes again (at least once, as
 * promised).
 */
const ROWS_PER_RUN = 1_000;
const RUN_MS = 60_000;
/**
 * When D1, the queue or the secret fail, the run stops and starts again after 1 s, doubling with each failure in a
 * row up to a minute (so a D1 outage is not met by every object at once); nothing pending is lost.
 */
const AFTER_ERROR_MS = 1_000;
const AFTER_ERRORS_MAX_MS = 60_000;

const log = logger("webhook-endpoint");

type Pending = { seq: number; delivery: DeliveryMessage };

/** What a run has made since it last recorded: the attempts, their retries, and the last pending row they cover. */
interface Made {
  attempts: NewDelivery[];
  retries: (DeliveryMessage & { attempts_before: number })[];
  seq: number;
}
const unrecorded = (): Made => ({ attempts: [], retries: [], seq: 0 });

export class WebhookEndpoint extends MeteredObject {
  /** Runs that failed in a row (in memory: an object started afresh tries at once). */
  private failedRuns = 0;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS pending (seq INTEGER PRIMARY KEY, message TEXT NOT NULL)");
  }

  /** Stores deliveries of this object's webhook; the alarm, at once, makes them. */
  async accept(messages: readonly DeliveryMessage[]): Promise<ObjectAnswer> {
    this.store(messages);
    await this.ctx.storage.setAlarm(Date.now());
    return this.reported({});
  }

  private store(messages: readonly DeliveryMessage[]): void {
    for (const message of messages) this.ctx.storage.sql.exec("INSERT INTO pending (message) VALUES (?)", JSON.stringify(message));
  }

  /** A run is an invocation of its own: its D1 and queue work and its storage's writes are logged with it. */
  override alarm(): Promise<void> {
    return this.invocation("webhook_endpoint_alarm", () => this.run());
  }

  /**
   * Rounds of the oldest pending deliveries, their attempts recorded together: D1 runs one statement at a time, so a
   * run costs it a read of the webhook and one batch (src/webhooks/delivery/rows.ts recordAttempts), however many
   * attempts it makes. A round whose attempts may change the webhook (`keepsState`) is recorded before the next,
   * which reads the webhook again. When D1 or the secret fail, nothing unrecorded is forgotten (those attempts are
   * made again); when the queue refuses the retries, they are kept here, counted. Either way the run stops, and
   * starts again later (AFTER_ERROR_MS).
   */
  private async run(): Promise<void> {
    try {
      const config = readConfig(this.env);
      if (typeof config === "string") throw new Error(config);
      const db = this.meter.database(this.env.DB);
      const started = Date.now();
      let handled = 0;
      let known: Map<string, WebhookRow> | undefined;
      let made = unrecorded();
      for (let rows = this.pendingAfter(0); rows.length > 0; rows = this.pendingAfter(made.seq)) {
        const id = rows[0]!.delivery.webhook_id;
        known ??= await webhooksByIds(db, [id]);
        const round = await this.round(config.WEBHOOK_SECRET_KEY, known.get(id), rows);
        made.attempts.push(...round.attempts);
        made.retries.push(...round.retries);
        made.seq = round.seq;
        handled += round.handled;
        const more = handled < ROWS_PER_RUN && Date.now() - started < RUN_MS;
        if (round.keepsState && more) continue;
        await this.record(db, known, made);
        if (!more) return await this.ctx.storage.setAlarm(Date.now());
        known = undefined;
        made = unrecorded();
      }
      if (known) await this.record(db, known, made);
    } catch (error) {
      const after = Math.min(AFTER_ERRORS_MAX_MS, AFTER_ERROR_MS * 2 ** this.failedRuns++);
      log.error("delivery run failed; tried again later", { error: String(error), after_ms: after });
      await this.ctx.storage.setAlarm(Date.now() + after);
    }
  }

  /** Up to ROUND_ROWS pending deliveries after `seq`, oldest first. */
  private pendingAfter(seq: number): Pending[] {
    return this.ctx.storage.sql
      .exec<{ seq: number; message: string }>("SELECT seq, message FROM pending WHERE seq > ? ORDER BY seq LIMIT ?", seq, ROUND_ROWS)
      .toArray()
      .map(({ seq, message }): Pending => ({ seq, delivery: JSON.parse(message) as DeliveryMessage }));
  }

  /**
   * A round's attempts made (and, behind a probe that got no answer, the rest not sent), not yet recorded: their
   * records, their retries, how many pending rows they cover and the last one's seq, and whether they leave the
   * webhook as it was read.
   */
  private async round(secretKey: string, webhook: WebhookRow | undefined, rows: readonly Pending[]) {
    const probing = Boolean(webhook?.failingSince);
    const what = ({ delivery }: Pending) => ({ webhook, event: delivery.event, attempt: (delivery.attempts_before ?? 0) + 1 });
    const sent = probing ? rows.slice(0, 1) : rows.slice(0, MAX_OPEN_CONNECTIONS);
    const made = await Promise.all(sent.map((row) => attemptDelivery(secretKey, what(row))));
    const [probe] = made;
    const unanswered = probing && probe !== undefined && probe !== "gone" && probe.record.statusCode === null;
    const notSent = unanswered ? rows.slice(1).map((row) => attemptNotSent(what(row))) : [];
    const handled = rows.slice(0, made.length + notSent.length);
    const attempted = [...made, ...notSent];
    const recorded = attempted.flatMap((attempt) => (attempt === "gone" ? [] : [attempt]));
    const retries = handled.flatMap(({ delivery }, i) => {
      const attempt = attempted[i]!;
      return attempt !== "gone" && attempt.outcome === "retrying" ? [{ ...delivery, attempts_before: attempt.record.attempt }] : [];
    });
    return {
      attempts: recorded.map((attempt) => attempt.record),
      retries,
      handled: handled.length,
      seq: handled.at(-1)!.seq,
      keepsState: webhook === undefined || keepsState(webhook, recorded),
    };
  }

  /** A run's attempts recorded in one D1 batch, their retries queued, then forgotten. */
  private async record(db: Database, known: ReadonlyMap<string, WebhookRow>, made: Made): Promise<void> {
    await recordAttempts(db, known, made.attempts);
    const queued = await sendAll(this.meter.queue(this.env.WEBHOOK_QUEUE), made.retries, (retry) =>
      retryDelaySeconds(retry.attempts_before),
    ).then(
      () => true,
      () => false,
    );
    this.ctx.storage.sql.exec("DELETE FROM pending WHERE seq <= ?", made.seq);
    if (queued) {
      this.failedRuns = 0;
      return;
    }
    // Retries the queue refused stay here, counted, and go with the next run rather than after their delay: early, never lost.
    this.store(made.retries);
    throw new Error("the queue refused this run's retries");
  }
}

/**
 * Whether attempts leave their webhook as it was read, so the next round may go on from what was read: all delivered
 * to an endpoint that was not failing, or all failed at a failing one before the 5-day rule disables it (its
 * failing_since that many days before a failure: src/webhooks/delivery/rows.ts DISABLE). Anything else (a
 * success or a 410 at a failing endpoint, a failure at a healthy one) is for D1 to apply before the next round.
 */
function keepsState(webhook: WebhookRow, attempts: readonly Attempted[]): boolean {
  if (webhook.failingSince === null) return attempts.every((attempt) => attempt.outcome === "delivered");
  const disabledFrom = new Date(Date.parse(webhook.failingSince) + FAILING_DAYS_TO_DISABLE * DAY_MS).toISOString();
  return attempts.every(({ outcome, record }) => (outcome === "retrying" || outcome === "failed") && record.deliveredAt < disabledFrom);
}
