import type { Context, ErrorHandler, NotFoundHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { logger } from "../platform/log.ts";

const log = logger("http");

/**
 * The one error type the app throws on purpose; `detail` is shown to the caller as is, and `help` beside it where the
 * contract fixes the detail's words (a 429's) and there is more to say.
 */
export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly detail: string,
    readonly headers: Record<string, string> = {},
    readonly help?: string,
  ) {
    super(detail);
  }
}

export function errorResponse(c: Context, error: ApiError): Response {
  const body = error.help === undefined ? { detail: error.detail } : { detail: error.detail, help: error.help };
  return c.json(body, error.status, error.headers);
}

/** Everything thrown ends here: known errors keep their status, the rest become a generic 500. */
export const onError: ErrorHandler = (err, c) => {
  if (err instanceof ApiError) return errorResponse(c, err);
  if (err instanceof HTTPException && err.status < 500) {
    return errorResponse(c, new ApiError(err.status, err.message || "The request could not be processed."));
  }
  log.error("unhandled error; answered 500", {
    request_id: c.get("requestId"),
    path: c.req.path,
    error: String(err),
    stack: err instanceof Error ? err.stack : undefined,
  });
  return errorResponse(c, new ApiError(500, "Internal error; try again, and quote the X-Request-Id header if it persists."));
};

export const notFound: NotFoundHandler = (c) =>
  errorResponse(
    c,
    // A deployed API's caller has no README: the index and the document are on the API itself.
    new ApiError(404, `There is no ${c.req.method} ${c.req.path} route; GET / lists the routes, and GET /openapi.json describes each.`),
  );

export const methodNotAllowedResponse = (c: Context, allowed: string[]) =>
  errorResponse(
    c,
    new ApiError(405, `${c.req.method} is not allowed on ${c.req.path}; use ${allowed.join(", ")}.`, { Allow: allowed.join(", ") }),
  );
