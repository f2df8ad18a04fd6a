import { matchInEnvironments } from "../alerts/environments.ts";
import type { AlertRule } from "../alerts/rules.ts";
import { keyStillAdmits } from "../api-keys/object/stub.ts";
import type { EventMessage } from "../events/messages.ts";
import { logger } from "../platform/log.ts";
import type { ObjectAnswer } from "../platform/metered.ts";
import { MeteredObject } from "../platform/metered-object.ts";
import { sandboxFactsOf } from "../sandbox/facts.ts";
import { accountSandbox } from "../sandbox/stub.ts";
import { MAX_STREAMS_PER_ACCOUNT, MAX_STREAMS_PER_KEY } from "./limits.ts";
import type { CapReached, HubMessage, Subscription } from "./protocol.ts";
import { eventFrame, KEEPALIVE, KEY_GONE_CLOSE, OBJECT_WORK_HEADER, SUBSCRIPTION_HEADER } from "./protocol.ts";

/**
 * A hub of the event stream: it holds the open streams of the accounts hashed to it (src/stream/stub.ts),
 * one hibernatable WebSocket each, opened by the worker that serves the stream's response. Between messages it
 * sleeps: the sockets stay open without it, and it is billed for none of that time.
 *
 * - A connect is refused (429's reason, no socket) when the key holds MAX_STREAMS_PER_KEY open streams or the account
 *   MAX_STREAMS_PER_ACCOUNT: every stream of an account is here, and an object runs one call at a time, so counting its
 *   sockets is the cap, with nothing stored; a socket whose worker went away is closed by the runtime.
 * - A publish (an ingestion's commit, src/stream/publish.ts) runs the alert rules (src/alerts/) over its events once
 *   for all the hub's streams and sends each stream only what matched. Only catalogue events are published.
 * - A key's change (its object's push) closes that key's streams the key no longer admits, asking the key's object
 *   about each one's address and scope, and hands the rest its new expiry. While it asks, a publish holds what it would
 *   send that key's streams and sends it after, only to those still open: an object serves other calls while one awaits
 *   another object, so without this a publish could reach a stream between the change and its close.
 *
 * A stream's subscription rides in its socket's attachment, so a woken hub has it without a read; a rule too big for an
 * attachment (2 KiB) is kept in the hub's storage for as long as its socket is open.
 */

/** A socket's attachment may hold 2,048 bytes as the runtime serializes it; a subscription's JSON within this leaves it room. */
const ATTACHMENT_JSON_MAX_BYTES = 1536;
const RULES_SCHEMA = "CREATE TABLE IF NOT EXISTS rules (socket TEXT PRIMARY KEY, rule TEXT NOT NULL)";

interface Attachment extends Omit<Subscription, "rule"> {
  socket: string;
  /** Absent when stored under `socket` instead. */
  rule?: AlertRule;
}

const keyTag = (keyId: string) => `key:${keyId}`;
const accountTag = (accountId: string) => `account:${accountId}`;
const log = logger("stream-hub");

export class StreamHub extends MeteredObject {
  /** Rules read back from storage, by socket: once per wake. */
  private readonly storedRules = new Map<string, AlertRule>();
  /** The keys whose streams a change is deciding on, each with the end of that decision (and of any before it). */
  private readonly keysUnderReview = new Map<string, Promise<void>>();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(KEEPALIVE.ping, KEEPALIVE.pong));
  }

  /** A stream's worker connects (a WebSocket upgrade carrying its subscription). */
  override async fetch(request: Request): Promise<Response> {
    const subscription = JSON.parse(decodeURIComponent(request.headers.get(SUBSCRIPTION_HEADER) ?? "null")) as Subscription | null;
    if (request.headers.get("Upgrade") !== "websocket" || !subscription)
      return new Response("a WebSocket upgrade with a subscription", { status: 400 });
    const refused = this.capReached(subscription);
    if (refused) return Response.json(refused satisfies CapReached, { status: 429, headers: this.workHeader() });
    const [client, server] = Object.values(new WebSocketPair()) as [WebSocket, WebSocket];
    const socket = crypto.randomUUID();
    const { rule, ...who } = subscription;
    let attachment: Attachment = { ...who, socket, rule };
    if (new TextEncoder().encode(JSON.stringify(attachment)).length > ATTACHMENT_JSON_MAX_BYTES) {
      this.ctx.storage.sql.exec(RULES_SCHEMA);
      this.ctx.storage.sql.exec("INSERT INTO rules (socket, rule) VALUES (?, ?)", socket, JSON.stringify(rule));
      this.storedRules.set(socket, rule);
      attachment = { ...who, socket };
    }
    this.ctx.acceptWebSocket(server, [keyTag(subscription.keyId), accountTag(subscription.accountId)]);
    server.serializeAttachment(attachment);
    return new Response(null, { status: 101, webSocket: client, headers: this.workHeader() });
  }

  /** A connect is a fetch, not an RPC: its work rides in a header, which the stream's worker counts. */
  private workHeader(): Record<string, string> {
    return { [OBJECT_WORK_HEADER]: JSON.stringify(this.reported({}).work) };
  }

  /**
   * Sends each open stream the events its rule matches (one message per stream). Answers how many streams got any, with
   * its work (its rules' D1 and archive reads, its storage rows). Account events are never passed here (src/stream/publish.ts); a hub
   * with no stream answers without work. A sandbox event reaches only its account's test streams, a live event only live
   * streams (matchInEnvironments).
   */
  async publish(messages: readonly EventMessage[]): Promise<{ streams: number } & ObjectAnswer> {
    return this.reported({ streams: await this.sendMatches(messages) });
  }

  private async sendMatches(messages: readonly EventMessage[]): Promise<number> {
    const subscribers = this.ctx.getWebSockets().flatMap((ws) => {
      const attachment = ws.deserializeAttachment() as Attachment | null;
      const rule = attachment && this.ruleOf(attachment);
      return rule
        ? [{ ...rule, ws, keyId: attachment.keyId, accountId: attachment.accountId, environment: attachment.environment ?? "live" }]
        : [];
    });
    if (subscribers.length === 0 || messages.length === 0) return 0;
    const sources = {
      db: this.meter.database(this.env.DB),
      alerts: this.meter.alertsDatabase(this.env.ALERTS_DB),
      sandboxFacts: sandboxFactsOf((accountId) => accountSandbox(this.env.SANDBOX, this.meter, accountId)),
    };
    const matched = await matchInEnvironments(sources, messages, subscribers);
    const frames = new Map<EventMessage, string>();
    const byStream = new Map<WebSocket, { keyId: string; events: { id: string; frame: string }[] }>();
    for (const { event, rule } of matched) {
      const { message } = event;
      let frame = frames.get(message);
      if (frame === undefined) frames.set(message, (frame = eventFrame(message.event)));
      const sent = { id: message.event.id, frame };
      const stream = byStream.get(rule.ws);
      if (stream) stream.events.push(sent);
      else byStream.set(rule.ws, { keyId: rule.keyId, events: [sent] });
    }
    await Promise.all(
      [...byStream].map(async ([ws, { keyId, events }]) => {
        // A change to the stream's key is being decided: its close, if it comes, goes first.
        const review = this.keysUnderReview.get(keyId);
        if (review) await review;
        if (ws.readyState === WebSocket.OPEN) send(ws, { kind: "events", events });
      }),
    );
    return byStream.size;
  }

  /** A key's object stored a change to the key: its streams the key no longer admits end; the others learn its expiry. */
  async keyChanged({ keyId, active, expiresAt }: { keyId: string; active: boolean; expiresAt: number | null }): Promise<ObjectAnswer> {
    // Marked before the first await, so a publish that would send meanwhile waits for the decision (and so does a later change).
    const review = (this.keysUnderReview.get(keyId) ?? Promise.resolve()).then(() =>
      Promise.all(
        this.ctx.getWebSockets(keyTag(keyId)).map(async (ws) => {
          const attachment = ws.deserializeAttachment() as Attachment;
          // A key's object that cannot be asked ends the stream: its client reconnects, and is admitted afresh.
          const admits =
            active &&
            (await this.meter.called(keyStillAdmits(this.env, attachment.keyHash, attachment.request), "key").then(
              (answer) => answer.admits,
              () => false,
            ));
          if (admits) send(ws, { kind: "key", expiresAt });
          else ws.close(KEY_GONE_CLOSE, "the API key no longer admits this stream");
        }),
      ),
    );
    const settled = review.then(
      () => undefined,
      () => undefined,
    );
    this.keysUnderReview.set(keyId, settled);
    try {
      await review;
    } finally {
      if (this.keysUnderReview.get(keyId) === settled) this.keysUnderReview.delete(keyId);
    }
    return this.reported({});
  }

  override webSocketClose(ws: WebSocket, code: number): void {
    this.forget(ws);
    // Answers the worker's close (1005/1006 cannot be sent back: those close without a code); the runtime may have already.
    try {
      ws.close(code === 1005 || code === 1006 ? 1000 : code);
    } catch {
      // closed both ways already
    }
  }

  override webSocketError(ws: WebSocket): void {
    this.forget(ws);
  }

  /** A worker sends only its keep-alive, which the runtime answers without waking the hub; nothing else is expected. */
  override webSocketMessage(): void {}

  private capReached({ keyId, accountId }: Subscription): CapReached | undefined {
    const open = (tag: string) => this.ctx.getWebSockets(tag).filter((ws) => ws.readyState === WebSocket.OPEN).length;
    if (open(keyTag(keyId)) >= MAX_STREAMS_PER_KEY) return { cap: "key" };
    if (open(accountTag(accountId)) >= MAX_STREAMS_PER_ACCOUNT) return { cap: "account" };
    return undefined;
  }

  private ruleOf(attachment: Attachment): AlertRule | undefined {
    if (attachment.rule) return attachment.rule;
    let rule = this.storedRules.get(attachment.socket);
    if (!rule) {
      const [row] = this.ctx.storage.sql.exec<{ rule: string }>("SELECT rule FROM rules WHERE socket = ?", attachment.socket).toArray();
      if (!row) return undefined;
      this.storedRules.set(attachment.socket, (rule = JSON.parse(row.rule) as AlertRule));
    }
    return rule;
  }

  private forget(ws: WebSocket) {
    const attachment = ws.deserializeAttachment() as Attachment | null;
    if (!attachment || attachment.rule) return;
    this.storedRules.delete(attachment.socket);
    this.ctx.storage.sql.exec("DELETE FROM rules WHERE socket = ?", attachment.socket);
  }
}

/** A send to a socket closing meanwhile throws: its stream is ending and will catch up from the feed when it reconnects. */
function send(ws: WebSocket, message: HubMessage) {
  try {
    ws.send(JSON.stringify(message));
  } catch (error) {
    log.warn("a stream's socket took no message", { error: String(error) });
  }
}
