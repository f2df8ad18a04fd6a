import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { expect, vi } from "vitest";

/**
 * The webhook receivers of the tests. External receivers are out of this machine's reach, so the
 * worker's outbound fetch is replaced inside the isolate (the worker and the tests share it): a
 * request to https://hooks.test/… is answered by the test's responder and recorded; the test IdP's
 * JWKS and the stand-in for GitHub's secret-scanning key list still go out for real; anything else is recorded as unexpected and fails (see `assertNoStrayRequests`).
 */

export const HOOKS_ORIGIN = "https://hooks.test";

export interface ReceivedRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
  signal: AbortSignal | undefined;
}

type Responder = (request: ReceivedRequest) => Response | Promise<Response>;

export interface Receiver {
  /** Every request to HOOKS_ORIGIN, in order. */
  received: ReceivedRequest[];
  /** Requests to anywhere else (other than the JWKS). */
  unexpected: string[];
  /** How requests to `url` are answered (200 "ok" unless set). */
  respond(url: string, responder: Responder): void;
  to(url: string): ReceivedRequest[];
  assertNoStrayRequests(): void;
}

let unique = 0;
/** A receiver URL of its own for a test. */
export const hookUrl = (name = "hook") => `${HOOKS_ORIGIN}/${name}-${Date.now()}-${++unique}`;

export function installReceiver(): Receiver {
  const realFetch = globalThis.fetch;
  const responders = new Map<string, Responder>();
  const receiver: Receiver = {
    received: [],
    unexpected: [],
    respond: (url, responder) => void responders.set(url, responder),
    to: (url) => receiver.received.filter((request) => request.url === url),
    assertNoStrayRequests: () => expect(receiver.unexpected, "outbound requests nothing expected").toEqual([]),
  };
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const request = new Request(input, init);
    if (request.url === env.IDP_JWKS_URL || request.url === env.SECRET_SCANNING_KEYS_URL) return realFetch(input, init);
    if (!request.url.startsWith(`${HOOKS_ORIGIN}/`)) {
      receiver.unexpected.push(`${request.method} ${request.url}`);
      throw new Error(`Unexpected outbound request in a test: ${request.method} ${request.url}`);
    }
    const received: ReceivedRequest = {
      url: request.url,
      method: request.method,
      headers: Object.fromEntries(request.headers),
      body: await request.text(),
      signal: init?.signal ?? undefined,
    };
    receiver.received.push(received);
    return (responders.get(request.url) ?? echoChallenge)(received);
  });
  return receiver;
}

/**
 * A receiver's default answer: "ok", or to an MCP subscription's verification POST (src/mcp/events/service.ts), its
 * challenge echoed, as an endpoint that wants the deliveries does.
 */
const echoChallenge: Responder = (request) => {
  const body = (() => {
    try {
      return JSON.parse(request.body) as { type?: unknown; challenge?: unknown };
    } catch {
      return undefined;
    }
  })();
  return body?.type === "verification" ? Response.json({ challenge: body.challenge }) : new Response("ok");
};

/** What a receiver using the `standardwebhooks` library gets out of a request: it throws when the signature is wrong. */
export function verifyWithLibrary(secret: string, request: ReceivedRequest): unknown {
  return new Webhook(secret).verify(request.body, request.headers);
}

/** A response that never comes: it fails only when the request's signal aborts it (the delivery timeout). */
export const hang: Responder = (request) =>
  new Promise((_, reject) => {
    const signal = request.signal;
    if (!signal) return reject(new Error("the delivery was sent without a timeout signal"));
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason));
  });
