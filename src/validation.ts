import type { Context } from "hono";
import { z } from "zod";
import { ApiError } from "./errors.ts";

function describe(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return "The request is invalid.";
  const field = issue.path.join(".");
  return field ? `${field}: ${issue.message}` : issue.message;
}

/** The one validation path: a zod failure becomes a 400 whose detail names the field. */
export function parseWith<S extends z.ZodType>(schema: S, input: unknown, what = "request"): z.infer<S> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) throw new ApiError(400, `Invalid ${what}: ${describe(parsed.error)}`);
  return parsed.data;
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
