import { z } from "zod";
import { jsonObject, required, trimmedText } from "../http/validation.ts";

/** A competitor's fields as the API takes them (observations create competitors, PATCH renames them), declared once. */

export const competitorId = z
  .string({ error: required("string") })
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, { error: 'must be 1-64 letters, digits, "_", "." or "-", such as "cmp_amazon"' });
export const competitorName = trimmedText(200);
export const competitorDomain = trimmedText(253).nullable();

export const competitorIdParam = z.object({ id: competitorId.meta({ description: "The competitor's id", example: "cmp_amazon" }) });

/** PATCH /admin/competitors/:id: a new name, a new domain (null clears it), or both. */
export const competitorPatchBody = z
  .strictObject(
    {
      name: competitorName
        .optional()
        .meta({ description: "The name every offer of this competitor shows (`competitor_name`), up to 200 characters" }),
      domain: competitorDomain.optional().meta({ description: "The shop's domain, up to 253 characters; null clears it" }),
    },
    jsonObject,
  )
  .refine((body) => body.name !== undefined || body.domain !== undefined, { error: "name at least one of name, domain" })
  .meta({ minProperties: 1 });
export type CompetitorPatch = z.output<typeof competitorPatchBody>;
