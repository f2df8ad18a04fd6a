import { z } from "zod";
import { required } from "../http/validation.ts";
import { CIDR_PATTERN, canonicalCidr, MAX_ALLOWED_IPS } from "./object/allowed-ips.ts";
import { KEY_SCOPES } from "./scopes.ts";

/** `allowed_ips` and `scopes` of POST and PATCH /api-keys, and of key records; declared once. */

const cidr = z
  .string({ error: required("string") })
  .regex(new RegExp(CIDR_PATTERN), { error: "must be an IPv4 or IPv6 address or CIDR, e.g. 203.0.113.0/24 or 2001:db8::/32" })
  .meta({ description: "An IPv4 or IPv6 address (/32 or /128) or CIDR", example: "203.0.113.0/24" });

export const allowedIpsInput = z
  .array(cidr, { error: required("array") })
  .max(MAX_ALLOWED_IPS, { error: `must hold at most ${MAX_ALLOWED_IPS} addresses or CIDRs` })
  .nullable()
  .transform((cidrs) => (cidrs === null ? null : [...new Set(cidrs.map(canonicalCidr))]))
  .meta({
    description:
      `Where the key may be used from: at most ${MAX_ALLOWED_IPS} IPv4/IPv6 addresses or CIDRs (an IPv4-mapped IPv6 form counts as ` +
      "IPv4); null: anywhere. A request from elsewhere is 403 and not counted.",
    example: ["203.0.113.0/24", "2001:db8::/32"],
  });

export const scopesInput = z
  .array(z.enum(KEY_SCOPES, { error: `must be one of ${KEY_SCOPES.join(", ")}` }), { error: required("array") })
  .min(1, { error: "must name at least one scope" })
  .transform((scopes) => KEY_SCOPES.filter((scope) => scopes.includes(scope)))
  .meta({
    description:
      "What the key may read: products:read (/products, /competitors), history:read (/products/{id}/history), events:read (/events); " +
      "all by default",
    example: ["products:read"],
  });

export const restrictionFields = {
  allowed_ips: z.array(z.string()).nullable().meta({ description: "Where the key may be used from (canonical CIDRs); null: anywhere" }),
  scopes: z.array(z.enum(KEY_SCOPES)).meta({ description: "What the key may read" }),
};
