import type { OAuthHelpers } from "@cloudflare/workers-oauth-provider";
import type { RequestIdVariables } from "hono/request-id";
import type { AlertFacts } from "../alerts/match.ts";
import type { ApiKeyOfRequest, KeyObjectControl } from "../api-keys/object/types.ts";
import type { SnapshotAccess } from "../catalogue/service.ts";
import type { EventMessage, WebhookMessage } from "../events/messages.ts";
import type { KeyData } from "../key-data/door.ts";
import type { Credential } from "../pipeline/identify.ts";
import type { Config } from "../platform/config.ts";
import type { Database } from "../platform/db.ts";
import type { WorkMeter } from "../platform/metered.ts";
import type { AccountRow } from "../platform/tables.ts";
import type { Decision } from "../rate-limit/types.ts";
import type { AccountSandbox } from "../sandbox/stub.ts";
import type { DeliveriesQueuedView } from "../webhooks/schema.ts";

/**
 * What a request's handlers and services need, built once per request by src/pipeline/services.ts.
 * A service takes the parts it uses (`Pick<RequestServices, …>`, or the database alone) and then one object
 * naming what the call is about; never Hono's context.
 */
export interface RequestServices {
  config: Config;
  /** Counts its round trips into `work`. */
  db: Database;
  /** The alert windows' own D1 database (ALERTS_DB: their day rows, src/alerts/tables.ts), counted the same. */
  alerts: Database;
  /**
   * A D1 session that may be served by a read replica (the Sessions API, "first-unconstrained"), counted the same:
   * for reads that need not see the very latest write (the feed's pages, price history), so they leave the primary
   * to what must (docs/scale.md).
   */
  replica: Database;
  keyObjects: KeyObjectControl;
  queue: Queue<WebhookMessage>;
  /** The catalogue snapshot in R2, and the builder's poke. */
  catalogue: SnapshotAccess;
  /** Events and price history that left D1 (src/events/archive.ts, src/catalogue/history-archive.ts). */
  archive: R2Bucket;
  /** One-click connect's OAuth records (src/connect/), counted. */
  oauthKv: KVNamespace;
  /** The OAuth library's view of those records, at this request's origin (src/connect/server.ts). */
  oauth: OAuthHelpers;
  /** An account's sandbox object (src/sandbox/object.ts), its calls counted: a test webhook's events and deliveries. */
  sandboxOf(accountId: string): AccountSandbox;
  /** What alert rules read of an account's sandbox (src/sandbox/facts.ts), through the same object. */
  sandboxFacts(accountId: string): AlertFacts;
  /** The request's tally; a body that does work as it streams passes through its `carry`. */
  work: WorkMeter;
  /** Work the request goes on with after its answer (waitUntil): the request's tally stays open until it ends. */
  afterAnswer(work: Promise<unknown>): void;
  /**
   * What an ingestion's committed events go on to: the streams and their first delivery (src/pipeline/after-commit.ts).
   * Resolves to what each sandbox account's test-delivery budget let through, or undefined when the queue fans them out.
   */
  afterCommit(events: readonly EventMessage[], options?: AfterCommitOptions): Promise<Map<string, DeliveriesQueuedView> | undefined>;
}

/** `inOutbox` false: a sandbox's events, which no outbox holds, so the first delivery is their one fan-out. */
export interface AfterCommitOptions {
  inOutbox?: boolean;
}

/** Hono's type parameter: the bindings and what middleware leaves on the context. */
export interface AppEnv {
  Bindings: Env;
  Variables: RequestIdVariables & {
    services: RequestServices;
    credential: Credential;
    account: AccountRow;
    apiKey: ApiKeyOfRequest;
    /** What an admitted key reads, its environment's (src/pipeline/key-data.ts): the one door. */
    keyData: KeyData;
    /** A secret-scanning report's decision in its own bucket, set once its signature verified (src/pipeline/admission.ts). */
    verifiedReport: Decision;
  };
}
