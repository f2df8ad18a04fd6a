import type { EventMessage } from "../events/messages.ts";
import type { Database } from "../platform/db.ts";
import type { Environment } from "../platform/tables.ts";
import { type AlertEvent, type AlertFacts, alertEventOf, matchAlerts } from "./match.ts";
import type { AlertRule } from "./rules.ts";

/**
 * Where the facts come from: the catalogue (D1: its offers' day rows answer the windows), and each account's sandbox,
 * handed in by whoever matches (src/sandbox/facts.ts, sandboxFactsOf), so a live event never passes the sandbox's code.
 */
export interface FactSources {
  db: Database;
  /** The alert windows' own database (ALERTS_DB): their day rows. */
  alerts: Database;
  sandboxFacts(accountId: string): AlertFacts;
}

/**
 * The (event, subscriber) pairs that match, environments kept apart: live events against live subscribers (webhooks,
 * streams) with the catalogue's facts; each account's sandbox events against that account's test subscribers with its
 * sandbox's facts. No other pair is ever asked, so no rule can let an event across.
 */
export async function matchInEnvironments<R extends AlertRule & { accountId: string; environment: Environment }>(
  sources: FactSources,
  messages: readonly EventMessage[],
  subscribers: readonly R[],
): Promise<{ event: AlertEvent & { message: EventMessage }; rule: R }[]> {
  const events = messages.map((message) => ({ ...alertEventOf(message), message }));
  const sandboxes = [...new Set(messages.flatMap((message) => message.sandbox_account_id ?? []))];
  const matched = await Promise.all([
    matchAlerts(
      { db: sources.db, alerts: sources.alerts },
      {
        events: events.filter(({ message }) => message.sandbox_account_id === undefined),
        rules: subscribers.filter((rule) => rule.environment === "live"),
      },
    ),
    ...sandboxes.map((accountId) =>
      matchAlerts(sources.sandboxFacts(accountId), {
        events: events.filter(({ message }) => message.sandbox_account_id === accountId),
        rules: subscribers.filter((rule) => rule.environment === "test" && rule.accountId === accountId),
      }),
    ),
  ]);
  return matched.flat();
}
