import { exports } from "cloudflare:workers";

export interface CallOptions {
  token?: string;
  /** An object is sent as JSON; a string is sent as it is. */
  body?: unknown;
  headers?: Record<string, string>;
}

/** A request through the worker's real fetch handler, as a client would send it. */
export function call(method: string, path: string, { token, body, headers = {} }: CallOptions = {}): Promise<Response> {
  // A fresh client address per call unless the test picks one, so tests don't share the IP bucket.
  const init: RequestInit = { method, headers: { "CF-Connecting-IP": randomTestIp(), ...headers } };
  if (token !== undefined) (init.headers as Record<string, string>).Authorization = `Bearer ${token}`;
  if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
  return exports.default.fetch(new Request(`https://api.test${path}`, init));
}

/** The body as text, read as bytes: workerd warns on every .text() of a body whose type is not text (NDJSON). */
export const utf8Text = async (res: Response) => new TextDecoder().decode(await res.arrayBuffer());

/** The body as JSON, after asserting the status (the body is the failure message). */
export async function expectJson<T = any>(res: Response, status: number): Promise<T> {
  const text = await res.clone().text();
  const { expect } = await import("vitest");
  expect(res.status, text).toBe(status);
  return JSON.parse(text) as T;
}

/** An address from the documentation ranges (RFC 5737), random enough to be a bucket of its own. */
export function randomTestIp(): string {
  const [a, b] = crypto.getRandomValues(new Uint8Array(2));
  return `198.51.${a}.${b}`;
}

/** The worker's own count of what a request cost (X-Work-Counts, on in the tests' config). */
export function workCounts(res: Response): { d1: number; keyDo: number; otherDo: number } {
  const header = res.headers.get("X-Work-Counts") ?? "";
  const value = (name: string) => Number(new RegExp(`${name}=(\\d+)`).exec(header)?.[1] ?? NaN);
  return { d1: value("d1"), keyDo: value("key-do"), otherDo: value("other-do") };
}

/** The rate-limit headers of a response, as numbers where they are numbers. */
export function rateLimitOf(res: Response) {
  const num = (name: string) => (res.headers.has(name) ? Number(res.headers.get(name)) : undefined);
  return {
    limit: num("X-RateLimit-Limit"),
    remaining: num("X-RateLimit-Remaining"),
    reset: num("X-RateLimit-Reset"),
    retryAfter: num("Retry-After"),
    policy: res.headers.get("RateLimit-Policy"),
    rateLimit: res.headers.get("RateLimit"),
  };
}
