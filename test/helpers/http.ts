import { exports } from "cloudflare:workers";

export interface CallOptions {
  token?: string;
  /** An object is sent as JSON; a string is sent as it is. */
  body?: unknown;
  headers?: Record<string, string>;
}

/** A request through the worker's real fetch handler, as a client would send it. */
export function call(method: string, path: string, { token, body, headers = {} }: CallOptions = {}): Promise<Response> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (token !== undefined) (init.headers as Record<string, string>).Authorization = `Bearer ${token}`;
  if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
  return exports.default.fetch(new Request(`https://api.test${path}`, init));
}

/** The body as JSON, after asserting the status (the body is the failure message). */
export async function expectJson<T = any>(res: Response, status: number): Promise<T> {
  const text = await res.clone().text();
  const { expect } = await import("vitest");
  expect(res.status, text).toBe(status);
  return JSON.parse(text) as T;
}
