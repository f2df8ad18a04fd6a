import { type DeliveryMessage, sendAll } from "../../events/messages.ts";
import { readConfig } from "../../platform/config.ts";
import { MAX_OPEN_CONNECTIONS } from "../../platform/connections.ts";
import { logger } from "../../platform/log.ts";
import type { ObjectAnswer } from "../../platform/metered.ts";
import { MeteredObject } from "../../platform/metered-object.ts";
import { attemptDelivery, attemptNotSent } from "./attempt.ts";
import { retryDelaySeconds } from "./schedule.ts";
import { recordAttempts, webhooksByIds } from "./store.ts";

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
 * consumer's (`recordAttempts`); a failed one goes back to WEBHOOK_QUEUE with the schedule's delay and its count
 * (`attempts_before`), so the queue stays the one timer of retries, and the consumer hands it back here when due.
 */

/** Pending deliveries read per round: those not sent cost no connection, so a round may take many. */
const ROUND_ROWS = 100;
/** A run's bound (an alarm has 15 minutes of wall time): what is left waits for the next run, at once. */
const ROWS_PER_RUN = 1_000;
/**
 * When D1, the queue or the secret fail, the run stops and starts again after 1 s, doubling with each failure in a
 * row up to a minute (so a D1 outage is not met by every object at once); nothing pending is lost.
 */
const AFTER_ERROR_MS = 1_000;
const AFTER_ERRORS_MAX_MS = 60_000;

const log = logger("webhook-endpoint");

type Pending = { seq: number; delivery: DeliveryMessage };

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

  private async run(): Promise<void> {
    try {
      let handled = 0;
      for (let round = await this.nextRound(); round > 0; round = await this.nextRound()) {
        this.failedRuns = 0;
        handled += round;
        if (handled >= ROWS_PER_RUN) return await this.ctx.storage.setAlarm(Date.now());
      }
    } catch (error) {
      const after = Math.min(AFTER_ERRORS_MAX_MS, AFTER_ERROR_MS * 2 ** this.failedRuns++);
      log.error("delivery run failed; tried again later", { error: String(error), after_ms: after });
      await this.ctx.storage.setAlarm(Date.now() + after);
    }
  }

  /**
   * The oldest pending deliveries: a round's attempts made (and, behind a probe that got no answer, the rest not
   * sent), recorded in one D1 batch, their retries queued, then forgotten. Returns how many it handled (0: nothing
   * pending). Throws when D1 or the secret fail (having forgotten nothing: the round is made again), and when the
   * queue refuses the retries (having kept them here, counted).
   */
  private async nextRound(): Promise<number> {
    const rows = this.ctx.storage.sql
      .exec<{ seq: number; message: string }>("SELECT seq, message FROM pending ORDER BY seq LIMIT ?", ROUND_ROWS)
      .toArray()
      .map(({ seq, message }): Pending => ({ seq, delivery: JSON.parse(message) as DeliveryMessage }));
    const first = rows[0];
    if (!first) return 0;
    const config = readConfig(this.env);
    if (typeof config === "string") throw new Error(config);
    const db = this.meter.database(this.env.DB);
    const known = await webhooksByIds(db, [first.delivery.webhook_id]);
    const webhook = known.get(first.delivery.webhook_id);
    const probing = Boolean(webhook?.failingSince);
    const what = ({ delivery }: Pending) => ({ webhook, event: delivery.event, attempt: (delivery.attempts_before ?? 0) + 1 });
    const sent = probing ? rows.slice(0, 1) : rows.slice(0, MAX_OPEN_CONNECTIONS);
    const made = await Promise.all(sent.map((row) => attemptDelivery(config.WEBHOOK_SECRET_KEY, what(row))));
    const [probe] = made;
    const unanswered = probing && probe !== undefined && probe !== "gone" && probe.record.statusCode === null;
    const notSent = unanswered ? rows.slice(1).map((row) => attemptNotSent(what(row))) : [];
    const handled = rows.slice(0, made.length + notSent.length);
    const attempts = [...made, ...notSent];
    await recordAttempts(
      db,
      known,
      attempts.flatMap((attempted) => (attempted === "gone" ? [] : [attempted.record])),
    );
    const retries = handled.flatMap(({ delivery }, i) => {
      const attempted = attempts[i]!;
      return attempted !== "gone" && attempted.outcome === "retrying" ? [{ ...delivery, attempts_before: attempted.record.attempt }] : [];
    });
    const queued = await sendAll(this.meter.queue(this.env.WEBHOOK_QUEUE), retries, (retry) =>
      retryDelaySeconds(retry.attempts_before),
    ).then(
      () => true,
      () => false,
    );
    this.ctx.storage.sql.exec("DELETE FROM pending WHERE seq <= ?", handled.at(-1)!.seq);
    if (queued) return handled.length;
    // Retries the queue refused stay here, counted, and go with the next run rather than after their delay: early, never lost.
    this.store(retries);
    throw new Error("the queue refused this round's retries");
  }
}
