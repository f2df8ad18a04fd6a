import { z } from "zod";
import { ApiError } from "./errors.ts";
import { fieldDetail } from "./field-detail.ts";

/** The one validation path: a zod failure becomes a 400 whose detail names the field. */

/** The 400 for one field of `what` ("body", "query", …), for rules a schema cannot hold (they depend on configuration). */
export const invalidField = (what: string, { field, message }: { field: string; message: string }) =>
  new ApiError(400, fieldDetail(what, field, message));

type Issue = z.core.$ZodIssue;

/**
 * The issue to report. A union that no shape accepts (a value of one of several object shapes, told apart by a literal
 * or enum field; or one value or a list of them) failed most plausibly in a shape of the value's own type, and among
 * those in the one that refused the fewest values (invalid_value: the discriminating field, an enum): its first such
 * refusal if any, else its first issue, under the union's path. So `?type=nope` is told the types, not that a list was
 * expected.
 */
function reported(issue: Issue): { path: PropertyKey[]; message: string } {
  if (issue.code !== "invalid_union" || issue.errors.length === 0) return issue;
  const ofAnotherType = (branch: Issue[]) => branch.some((inner) => inner.code === "invalid_type" && inner.path.length === 0);
  const sameType = issue.errors.filter((branch) => !ofAnotherType(branch));
  const refusals = (branch: Issue[]) => branch.filter((inner) => inner.code === "invalid_value");
  const branch = (sameType.length > 0 ? sameType : issue.errors).reduce((best, next) =>
    refusals(next).length < refusals(best).length ? next : best,
  );
  const inner = refusals(branch)[0] ?? branch[0];
  if (!inner) return issue;
  const found = reported(inner);
  return { path: [...issue.path, ...found.path], message: found.message };
}

/** The 400 for a failed parse of `what`: its detail names the first field that failed. */
function invalid(what: string, error: z.ZodError): ApiError {
  const issue = error.issues[0];
  if (!issue) return new ApiError(400, `Invalid ${what}: the request is invalid.`);
  const { path, message } = reported(issue);
  return invalidField(what, { field: path.join("."), message });
}

/** What each @hono/zod-openapi validation target is called in a 400's detail. */
const TARGET_NAMES: Record<string, string> = {
  query: "query",
  param: "path parameter",
  json: "body",
  header: "header",
  cookie: "cookie",
  form: "body",
};

/** Every route app's `defaultHook` (src/http/openapi.ts): what the declared schemas refuse becomes the 400 above. */
export function validationHook(result: { target: string; success: boolean; error?: z.ZodError }): void {
  if (!result.success && result.error) throw invalid(TARGET_NAMES[result.target] ?? result.target, result.error);
}

/** A field's message for a missing value or one of the wrong type. */
export const required = (type: string) => (issue: { input?: unknown }) => (issue.input === undefined ? "is required" : `must be a ${type}`);

/** An object schema's own message for a non-object; other issues (an unknown field) keep zod's, which names the field. */
export const jsonObject = { error: (issue: { code?: string }) => (issue.code === "invalid_type" ? "must be a JSON object" : undefined) };

/**
 * Free text of at most `max` UTF-16 code units, trimmed, not blank. The OpenAPI `pattern` says "not
 * blank" the only way a document can (a non-space character somewhere).
 */
export const trimmedText = (max: number) =>
  z
    .string({ error: required("string") })
    .trim()
    .min(1, { error: "must not be empty" })
    .max(max, { error: `must be at most ${max} characters` })
    .meta({
      pattern: "\\S",
      description: "Surrounding spaces are trimmed; must not be blank. The length counts UTF-16 code units (an emoji counts twice)",
    });
