import { exports } from "cloudflare:workers";
import type { components, paths } from "../../client/schema.d.ts";

export interface CallOptions {
  token?: string;
  /** An object is sent as JSON; a string is sent as it is. */
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * A request through the worker's real fetch handler, as a client would send it. When method and
 * path name an operation of the OpenAPI document (a `${id}` in the path stands for a `{id}`, a query
 * is ignored), the response remembers it, so `expectJson` reads the body as the generated type.
 */
export function call<Method extends string, Path extends string>(
  method: Method,
  path: Path,
  { token, body, headers = {} }: CallOptions = {},
): Promise<CallResponse<Method, Path>> {
  // A fresh client address per call unless the test picks one, so tests don't share the IP bucket.
  const init: RequestInit = { method, headers: { "CF-Connecting-IP": randomTestIp(), ...headers } };
  if (token !== undefined) (init.headers as Record<string, string>).Authorization = `Bearer ${token}`;
  if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
  return exports.default.fetch(new Request(`https://api.test${path}`, init)) as Promise<CallResponse<Method, Path>>;
}

declare const operation: unique symbol;
/** A response that knows which documented operation answered it (a type-level tag only). */
type ApiResponse<Operation> = Response & { readonly [operation]: Operation };
/** A response with no documented operation behind it: its body's type is the caller's to name. */
type UntypedResponse = Response & { readonly [operation]?: never };

type PathOnly<P extends string> = P extends `${infer Path}?${string}` ? Path : P;
type Segments<P extends string> = P extends `/${infer Head}/${infer Rest}`
  ? [Head, ...Segments<`/${Rest}`>]
  : P extends `/${infer Last}`
    ? [Last]
    : [];
type SegmentsMatch<Actual extends string[], Template extends string[]> = Actual extends [infer A, ...infer ARest extends string[]]
  ? Template extends [infer T, ...infer TRest extends string[]]
    ? (T extends `{${string}}` ? true : A extends T ? true : false) extends true
      ? SegmentsMatch<ARest, TRest>
      : false
    : false
  : Template extends []
    ? true
    : false;
/** The document's path a request path matches: `/api-keys/${string}/rotate` → "/api-keys/{id}/rotate". */
type DocumentPath<P extends string> = {
  [T in keyof paths]: SegmentsMatch<Segments<PathOnly<P>>, Segments<T>> extends true ? T : never;
}[keyof paths];
type OperationOf<Method extends string, P extends string> = {
  [T in DocumentPath<P>]: Lowercase<Method> extends keyof paths[T] ? NonNullable<paths[T][Lowercase<Method>]> : never;
}[DocumentPath<P>];
type CallResponse<Method extends string, P extends string> = [OperationOf<Method, P>] extends [never]
  ? UntypedResponse
  : ApiResponse<OperationOf<Method, P>>;

type ResponsesOf<Operation> = Operation extends { responses: infer R } ? R : never;
/**
 * The body the document gives an operation's status. A 4xx or 5xx it does not list is the API's one
 * error shape (every error is `{"detail"}`); any other status it does not list has no known body.
 */
type BodyOf<Operation, Status extends number> = Status extends keyof ResponsesOf<Operation>
  ? ResponsesOf<Operation>[Status] extends { content: { "application/json": infer Body } }
    ? Body
    : never
  : `${Status}` extends `${4 | 5}${string}`
    ? components["schemas"]["Error"]
    : unknown;

/** The body as text, read as bytes: workerd warns on every .text() of a body whose type is not text (NDJSON). */
export const utf8Text = async (res: Response) => new TextDecoder().decode(await res.arrayBuffer());

/**
 * The body as JSON, after asserting the status (the body is the failure message). Its type is the
 * document's for the call's operation and this status; a response `call` could not tie to an
 * operation (a raw Request, a path not in the document) needs the type named: `expectJson<T>(res, 200)`.
 */
export async function expectJson<Operation, Status extends number>(
  res: ApiResponse<Operation>,
  status: Status,
): Promise<BodyOf<Operation, Status>>;
export async function expectJson<T>(res: UntypedResponse, status: number): Promise<T>;
export async function expectJson(res: Response, status: number): Promise<unknown> {
  const text = await res.clone().text();
  const { expect } = await import("vitest");
  expect(res.status, text).toBe(status);
  return JSON.parse(text);
}

/**
 * An address from IPv6's documentation range (RFC 3849) in a /64 of its own among 2^32 (a client IP's bucket is its
 * /64): the suite makes thousands of calls, and a /16 of IPv4 addresses (65,536) let two of them share a bucket now and
 * then, so a test reading its fresh bucket's `remaining` saw another's request in it.
 */
export function randomTestIp(): string {
  const [a, b] = crypto.getRandomValues(new Uint16Array(2));
  return `2001:db8:${a!.toString(16)}:${b!.toString(16)}::1`;
}

/** X-Work-Counts' fields, in the contract's order. */
export const WORK_COUNT_FIELDS = [
  "d1",
  "d1-statements",
  "d1-rows-read",
  "d1-rows-written",
  "key-do",
  "other-do",
  "do-rows-written",
  "r2-a",
  "r2-b",
  "queue-sent",
] as const;
export type WorkCountField = (typeof WORK_COUNT_FIELDS)[number];

/**
 * Every field of X-Work-Counts (on in the tests' config): the worker's own meter of what a request cost, as it stood
 * when the headers left. Throws unless the header holds exactly the contract's fields, in its order, each a whole
 * number, then `final=0` or `final=1`. A tally with `final=0` may still grow: test/helpers/work-log.ts reads the final one.
 */
export function workMeter(res: Response): Record<WorkCountField, number> {
  const header = res.headers.get("X-Work-Counts") ?? "";
  const fields = header.split("; ").map((field) => [field.split("=")[0]!, Number(field.split("=")[1])] as const);
  const last = fields.pop();
  const names = fields.map(([name]) => name).join(", ");
  const counts = names === WORK_COUNT_FIELDS.join(", ") && fields.every(([, value]) => Number.isInteger(value) && value >= 0);
  if (!counts || last?.[0] !== "final" || (last[1] !== 0 && last[1] !== 1)) {
    throw new Error(`X-Work-Counts is "${header}", not the contract's fields (${WORK_COUNT_FIELDS.join(", ")}) in order, then final=0|1`);
  }
  return Object.fromEntries(fields) as Record<WorkCountField, number>;
}

/** Whether X-Work-Counts says nothing could follow the headers (`final=1`): its tally is then the final one. */
export const workMeterIsFinal = (res: Response) => res.headers.get("X-Work-Counts")?.endsWith("; final=1") ?? false;

/** The D1 round trips and object calls of a request (X-Work-Counts). */
export function workCounts(res: Response): { d1: number; keyDo: number; otherDo: number } {
  const meter = workMeter(res);
  return { d1: meter.d1 ?? NaN, keyDo: meter["key-do"] ?? NaN, otherDo: meter["other-do"] ?? NaN };
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
