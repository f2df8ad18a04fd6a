import { cursorGone } from "../events/cursor.ts";
import type { EventMessage } from "../events/messages.ts";
import { DEFAULT_FEED_LIMIT } from "../events/query.ts";
import { ApiError } from "../http/errors.ts";
import type { IngestionResult, Observation } from "../observations/schema.ts";
import type { ObjectAnswer, WorkMeter } from "../platform/metered.ts";
import type { SandboxEventsQuery, SandboxHistoryQuery, SandboxIngestion } from "./object.ts";
import type { OverlayRow, ProductState } from "./overlay.ts";
import { SANDBOX_RETENTION_DAYS } from "./retention.ts";

/**
 * The way to an account's sandbox object (src/sandbox/object.ts), apart from the class so the app imports no object.
 * Every call counts into `work`: the object's rows written and read are the calling request's.
 */
export function accountSandbox(objects: Env["SANDBOX"], work: WorkMeter, accountId: string) {
  const stub = objects.get(objects.idFromName(accountId));
  return {
    /** Whose sandbox it is: what it holds is named for it alone (its list's ETag). */
    accountId,
    /** POST /test/observations' ingestion, in the object; its refusal thrown here, as the ingestion threw it there. */
    async ingest(observations: readonly Observation[]): Promise<{ result: IngestionResult; events: EventMessage[] }> {
      const answer = await work.called<SandboxIngestion & ObjectAnswer>(stub.ingest(accountId, observations));
      if ("refused" in answer) throw new ApiError(answer.refused.status, answer.refused.detail, answer.refused.headers);
      return answer;
    },
    /** The products the account changed, by id: every one (a list), or those named. One call. */
    async overlay(productIds?: readonly string[]): Promise<Map<string, OverlayRow>> {
      const { rows } = await work.called(stub.overlay(productIds));
      return new Map(rows.map((row) => [row.product_id, { version: row.version, ...(JSON.parse(row.state) as ProductState) }]));
    },
    /** The account's own history rows of these products, oldest first. One call. */
    history: async (productIds: readonly string[], query?: SandboxHistoryQuery) =>
      (await work.called(stub.history(productIds, query))).rows,
    /** The bodies of these of its events, by id (those it still keeps). One call. */
    async payloads(ids: readonly string[]): Promise<Map<string, string>> {
      const { rows } = await work.called(stub.payloads(ids));
      return new Map(rows.map((row) => [row.id, row.payload]));
    },
    /** A page of its events; a cursor it does not keep is 410. One call. */
    async events(query: SandboxEventsQuery) {
      const { rows, gone } = await work.called(stub.events(query));
      if (gone) throw cursorGone(query.after!, SANDBOX_RETENTION_DAYS);
      return rows;
    },
  };
}
export type AccountSandbox = ReturnType<typeof accountSandbox>;

/**
 * A page of the sandbox's feed as GET /events answers it (and the stream's backfill, MCP's recent_changes newest first),
 * from the feed's own query: its event rows read `limit` + 1, so the page knows if more follow.
 */
export async function sandboxFeed<Event>(
  sandbox: AccountSandbox,
  {
    type,
    limit = DEFAULT_FEED_LIMIT,
    ...query
  }: { after?: string | undefined; since?: string | undefined; type?: readonly string[] | undefined; limit?: number | undefined },
  { newestFirst = false } = {},
): Promise<{ events: Event[]; next_cursor: string | null }> {
  const rows = await sandbox.events({ ...query, types: type, limit: limit + 1, newestFirst });
  const events = rows.slice(0, limit).map((row) => ({ id: row.id, ...JSON.parse(row.payload) }) as Event);
  return { events, next_cursor: rows.length > limit ? rows[limit - 1]!.id : null };
}
