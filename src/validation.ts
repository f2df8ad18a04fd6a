import type { Context } from "hono";
import { z } from "zod";
import { ApiError } from "./errors.ts";

function describe(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return "The request is invalid.";
  const field = issue.path.join(".");
  return field ? `${field}: ${issue.message}` : issue.message;
}

/** The 400 for a failed parse of `what` ("body", "query", …): its detail names the field. */
export const invalid = (what: string, error: z.ZodError) => new ApiError(400, `Invalid ${what}: ${describe(error)}`);

/** The one validation path: a zod failure becomes a 400 whose detail names the field. */
export function parseWith<S extends z.ZodType>(schema: S, input: unknown, what = "request"): z.infer<S> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) throw invalid(what, parsed.error);
  return parsed.data;
}

/** What each @hono/zod-openapi validation target is called in a 400's detail. */
const TARGET_NAMES: Record<string, string> = { query: "query", param: "path parameter", json: "body", header: "header", cookie: "cookie", form: "body" };

/**
 * The routes' `defaultHook` (src/routes/openapi.ts): the query and path parameters that
 * @hono/zod-openapi validates against a route's declared schemas fail through the same 400 as parseWith.
 */
export function validationHook(result: { target: string; success: boolean; error?: z.ZodError }): void {
  if (!result.success && result.error) throw invalid(TARGET_NAMES[result.target] ?? result.target, result.error);
}

/** Reads the body as JSON whatever its Content-Type says (spec 4.5 makes the header optional). */
export async function parseJsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.infer<S>> {
  // Decoded by hand: the runtime warns when .text() reads a body whose Content-Type is not text.
  const text = new TextDecoder().decode(await c.req.arrayBuffer());
  if (text.trim() === "") throw new ApiError(400, "The request body is empty; send a JSON object.");
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError(400, "The request body is not valid JSON.");
  }
  return parseWith(schema, body, "body");
}

export function parseQuery<S extends z.ZodType>(c: Context, schema: S): z.infer<S> {
  return parseWith(schema, c.req.query(), "query");
}
