import { z } from "zod";
import { filterValue, strictQuery, when } from "../http/query.ts";
import { jsonObject, required, trimmedText } from "../http/validation.ts";
import { currency, money, prefixedId, timestamp } from "../http/wire.ts";

/** The catalogue's wire shapes, declared once; the service builds values of the inferred types. */

export const productIdParam = z.object({
  id: z.string().min(1).meta({ description: "The product's id (`prd_…`)", example: "prd_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d" }),
});

export const ifNoneMatch = z.object({
  "If-None-Match": z.string().optional().meta({ description: "The ETag of a response you hold: 304 while the catalogue is unchanged" }),
});

export const productsQuery = strictQuery({
  sku: filterValue.optional().meta({ description: "Exactly this SKU", example: "KET-1000" }),
  competitor: filterValue.optional().meta({ description: "Products with an offer from this competitor id (exact)", example: "cmp_amazon" }),
  brand: filterValue.optional().meta({ description: "Brand, case-insensitive", example: "Acme" }),
  category: filterValue.optional().meta({ description: "Category, case-insensitive", example: "Kettles" }),
  updated_since: when("Products whose updated_at is at or after this", "2026-01-31T12:00:00Z"),
});

export const historyQuery = strictQuery({
  competitor: filterValue.optional().meta({ description: "Only this competitor's rows", example: "cmp_amazon" }),
  from: when("From this instant, inclusive", "2026-01-01"),
  to: when("Up to this instant, exclusive; later than from", "2026-02-01"),
}).refine((q) => q.from === undefined || q.to === undefined || q.from < q.to, { path: ["to"], error: "must be later than from" });

export type ProductFilters = z.output<typeof productsQuery>;
export type HistoryQuery = z.output<typeof historyQuery>;

const Offer = z
  .object({
    competitor_id: z.string(),
    competitor_name: z.string(),
    url: z.string().nullable(),
    price: money,
    regular_price: money.nullable(),
    currency,
    shipping_cost: money.nullable(),
    in_stock: z.boolean(),
    previous_price: money.nullable().meta({ description: "The price before the latest change" }),
    price_changed_at: timestamp.nullable(),
    checked_at: timestamp,
  })
  .meta({ id: "Offer", description: "A competitor's current offer" });
export type OfferView = z.infer<typeof Offer>;

/**
 * min/max/lowest are taken over the offers in the product's most common currency (ties go to the
 * alphabetically first code), named by `currency`: prices in different currencies are never compared.
 * Stock does not matter for min/max (in_stock_count says how many can be bought); shipping is excluded.
 */
export const Summary = z
  .object({
    min_price: money.nullable(),
    max_price: money.nullable(),
    currency: currency
      .nullable()
      .meta({ description: "The product's most common offer currency; min/max/lowest are over its offers only" }),
    offer_count: z.int(),
    in_stock_count: z.int(),
    lowest_competitor_id: z.string().nullable(),
  })
  .meta({ id: "Summary" });
export type SummaryView = z.infer<typeof Summary>;

export const Product = z
  .object({
    id: prefixedId("prd", "0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d"),
    sku: z.string(),
    gtin: z.string().nullable(),
    mpn: z.string().nullable(),
    name: z.string(),
    brand: z.string().nullable(),
    category: z.string().nullable(),
    url: z.string().nullable(),
    image_url: z.string().nullable(),
    offers: z.array(Offer),
    summary: Summary,
    created_at: timestamp,
    updated_at: timestamp,
    last_changed_at: timestamp.nullable(),
  })
  .meta({ id: "Product" });
export type ProductView = z.infer<typeof Product>;

export const ProductList = z.object({ products: z.array(Product) }).meta({ id: "ProductList" });

const HistoryEntry = z.object({ competitor_id: z.string(), price: money, currency, in_stock: z.boolean(), observed_at: timestamp });

export const History = z
  .object({
    product_id: z.string(),
    history: z.array(HistoryEntry).meta({ description: "Oldest first; at most 1,000 (then X-Result-Truncated: true)" }),
  })
  .meta({ id: "History" });
export type HistoryView = z.infer<typeof History>;

export const Competitor = z
  .object({ id: z.string(), name: z.string(), domain: z.string().nullable(), offer_count: z.int() })
  .meta({ id: "Competitor" });
export type CompetitorView = z.infer<typeof Competitor>;

export const CompetitorList = z.object({ competitors: z.array(Competitor) }).meta({ id: "CompetitorList" });

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
