import { type AlertEvent, type AlertFacts, alertEventOf, matchAlerts } from "../alerts/match.ts";
import type { AlertRule } from "../alerts/rules.ts";
import { exactAnswers } from "../alerts/windows.ts";
import { type ArchivedHistoryRow, mergeHistory } from "../catalogue/history-archive.ts";
import type { EventMessage } from "../events/messages.ts";
import type { Database } from "../platform/db.ts";
import type { Environment } from "../platform/tables.ts";
import { baseHistory, sandboxBase } from "./catalogue.ts";
import { productState } from "./overlay.ts";
import type { AccountSandbox } from "./stub.ts";

/**
 * What the alert rules need to know about a sandbox event (src/alerts/match.ts): the product's brand and category and
 * the offer's prior prices, from the account's sandbox (the generated base and the account's own changes), so a test
 * webhook's or a test stream's rules decide as a live one's do. At most one call to the account's object each.
 */
export function sandboxFacts(sandbox: AccountSandbox): AlertFacts {
  const base = sandboxBase();
  return {
    async products(ids) {
      const known = [...new Set(ids)].filter((id) => base.byId.has(id));
      const overlay = known.length === 0 ? new Map() : await sandbox.overlay(known);
      return new Map(
        known.map((id) => {
          const { product } = productState(base, overlay, base.byId.get(id)!);
          return [id, { brand: product.brand, category: product.category }];
        }),
      );
    },
    async priorPrices(questions) {
      const productIds = [...new Set(questions.map((q) => q.p))];
      const own = new Map<string, ArchivedHistoryRow[]>();
      for (const row of await sandbox.history(productIds)) {
        const rows = own.get(row.productId);
        if (rows) rows.push(row);
        else own.set(row.productId, [row]);
      }
      // Each product's history merged once, whatever the number of questions about it.
      const rows = productIds.flatMap((productId) =>
        mergeHistory(baseHistory(base, productId), own.get(productId) ?? []).map((row) => ({ ...row, productId })),
      );
      return exactAnswers(questions, rows);
    },
  };
}

/** Where the facts come from: the catalogue (D1: its offers' day rows answer the windows), and each account's sandbox object. */
export interface FactSources {
  db: Database;
  /** The alert windows' own database (ALERTS_DB): their day rows. */
  alerts: Database;
  sandboxOf(accountId: string): AccountSandbox;
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
      matchAlerts(sandboxFacts(sources.sandboxOf(accountId)), {
        events: events.filter(({ message }) => message.sandbox_account_id === accountId),
        rules: subscribers.filter((rule) => rule.environment === "test" && rule.accountId === accountId),
      }),
    ),
  ]);
  return matched.flat();
}
