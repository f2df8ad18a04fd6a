/** Calls to this API with the signed-in account's access token, and errors put as people read them. */

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** From a 429's Retry-After: how long to wait before the next try. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

let accessToken: string | undefined;
let onSessionEnded: (message: string) => void = () => {};

/** The token lives in this module's memory only: never in localStorage, gone with the page. */
export function useAccessToken(token: string | undefined, sessionEnded?: (message: string) => void): void {
  accessToken = token;
  if (sessionEnded) onSessionEnded = sessionEnded;
}

/** "45 seconds", "2 minutes", "1 hour 5 minutes". */
export function duration(seconds: number): string {
  const plural = (n: number, unit: string) => `${n} ${unit}${n === 1 ? "" : "s"}`;
  if (seconds < 60) return plural(seconds, "second");
  if (seconds < 3600) return plural(Math.ceil(seconds / 60), "minute");
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.ceil((seconds % 3600) / 60);
  return minutes ? `${plural(hours, "hour")} ${plural(minutes, "minute")}` : plural(hours, "hour");
}

async function failureOf(res: Response): Promise<ApiFailure> {
  let detail = "";
  try {
    const body = (await res.json()) as { detail?: unknown };
    if (typeof body.detail === "string") detail = body.detail;
  } catch {}
  if (res.status === 429) {
    const wait = Number(res.headers.get("Retry-After"));
    const seconds = Number.isFinite(wait) && wait > 0 ? Math.ceil(wait) : 60;
    return new ApiFailure(429, `${detail || "Too many requests."} Wait ${duration(seconds)} before trying again.`, seconds);
  }
  if (detail) return new ApiFailure(res.status, detail);
  if (res.status >= 500) return new ApiFailure(res.status, `The server had a problem (HTTP ${res.status}); try again in a moment.`);
  return new ApiFailure(res.status, `The request failed (HTTP ${res.status}).`);
}

/** `token` in the Authorization header; `session`: the account's token, whose 401 ends the page's session. */
async function call<T>(token: string, session: boolean, method: string, path: string, body?: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
      body: body === undefined ? null : JSON.stringify(body),
      cache: "no-store",
    });
  } catch {
    throw new ApiFailure(0, "Could not reach the API; check your connection and try again.");
  }
  if (!res.ok) {
    const failure = await failureOf(res);
    // A 401 with a token means it has expired or is no longer accepted: the session is over.
    if (res.status === 401 && session) onSessionEnded(failure.message);
    throw failure;
  }
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** A call as the signed-in account. */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  if (!accessToken) throw new ApiFailure(401, "You are not signed in.");
  return call<T>(accessToken, true, method, path, body);
}

/** A call with an API key (the test key "Send a price change" uses): its 401 is about that key, not the session. */
export const apiWithKey = <T>(key: string, method: string, path: string, body?: unknown): Promise<T> =>
  call<T>(key, false, method, path, body);
