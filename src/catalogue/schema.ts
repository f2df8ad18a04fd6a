import { z } from "zod";
import { later } from "../http/document-rules.ts";
import { filterValue, strictQuery, when } from "../http/query.ts";
import { jsonObject, required, trimmedText } from "../http/validation.ts";
import { currency, money, orNull, prefixedId, timestamp } from "../http/wire.ts";
import { currencySchema } from "../platform/money.ts";
import { CHECK_STATUSES, OFFER_CONDITIONS, QUANTITY_UNITS } from "../platform/tables.ts";
import { UNIT_PRICE_PER } from "./figures.ts";

/** The catalogue's wire shapes, declared once; the service builds values of the inferred types. */

export const productIdParam = z.object({
  id: z.string().min(1).meta({ description: "The product's id (`prd_…`)", example: "prd_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d" }),
});

export const ifNoneMatch = z.object({
  "If-None-Match": z.string().optional().meta({ description: "The ETag of a response you hold: 304 while the catalogue is unchanged" }),
});

/** `?currency=`: not a filter: every offer gains `converted`, and the summary is in this currency. */
const targetCurrency = currencySchema.optional().meta({
  description:
    "Convert into this currency (ISO-4217): each offer gains `converted` from the latest rates on or before today (PUT " +
    "/admin/fx-rates), rounded half-even to its minor unit, and the summary's min_price/max_price and lowest_offer are " +
    "in it. A currency without a rate today is refused (400): GET /fx-rates lists those that have one",
  example: "EUR",
});

export const productsQuery = strictQuery({
  sku: filterValue.optional().meta({ description: "Exactly this SKU", example: "KET-1000" }),
  competitor: filterValue.optional().meta({ description: "Products with an offer from this competitor id (exact)", example: "cmp_amazon" }),
  brand: filterValue.optional().meta({ description: "Brand, case-insensitive", example: "Acme" }),
  category: filterValue.optional().meta({ description: "Category, case-insensitive", example: "Kettles" }),
  updated_since: when("Products whose updated_at is at or after this", "2026-01-31T12:00:00Z"),
  currency: targetCurrency,
});

export const productQuery = strictQuery({ currency: targetCurrency });

export const historyQuery = later(
  strictQuery({
    competitor: filterValue.optional().meta({ description: "Only this competitor's rows", example: "cmp_amazon" }),
    from: when("From this instant, inclusive", "2026-01-01"),
    to: when("Up to this instant, exclusive; later than from", "2026-02-01"),
  }),
  "to",
  "from",
);

export type ProductFilters = z.output<typeof productsQuery>;
export type HistoryQuery = z.output<typeof historyQuery>;

/** Named enums (components), so a generated client has one type for each. */
export const OfferCondition = z.enum(OFFER_CONDITIONS, { error: "must be new, used or refurbished" }).meta({
  id: "OfferCondition",
  description: "The item's condition as the competitor sells it",
  example: "new",
});
const CheckStatus = z.enum(CHECK_STATUSES, { error: "must be ok, not_found or blocked" }).meta({
  id: "CheckStatus",
  description:
    "How the offer's last check went: ok (a price was read), not_found (the page or product is gone) or blocked (the shop refused " +
    "the check). A check that is not ok says nothing about price or stock: both keep their last known values",
  example: "ok",
});
export const QuantityUnit = z.enum(QUANTITY_UNITS, { error: "must be one of g, kg, ml, l, cm, m, m2, count" }).meta({
  id: "QuantityUnit",
  description: "The unit of `quantity`: g, kg, ml, l, cm, m, m2 or count (pieces)",
  example: "g",
});

const UnitPrice = z
  .object({
    amount: money.meta({ description: "price ÷ quantity in `per`'s unit, rounded half-even to the currency's minor unit" }),
    per: z.enum(UNIT_PRICE_PER).meta({ id: "UnitPricePer", description: "What the amount buys: g → 1 kg, ml → 1 l, cm → 1 m" }),
  })
  .meta({ id: "UnitPrice", description: "The price per kilogram, litre, metre, square metre or piece (docs/observations.md)" });

const ConvertedPrice = z
  .object({
    currency,
    price: money.meta({ description: "price × rate, rounded half-even to the target currency's minor unit" }),
    total_price: money.nullable().meta({ description: "total_price converted the same way; null while shipping is unknown" }),
    rate: z
      .string()
      .regex(/^\d+(\.\d+)?$/)
      .meta({
        description:
          "Units of `currency` for one unit of the offer's currency, through the rates' base (cross rate), rounded half-even to " +
          "10 decimal places for display: the prices are converted with the exact quotient",
        example: "0.9231905465",
      }),
    rate_date: z.iso.date().meta({ description: "The day of the rates used: the latest on or before today (UTC)" }),
  })
  .meta({ id: "ConvertedPrice", description: "The offer in the currency asked for (`?currency=`)" });

const Offer = z
  .object({
    competitor_id: z.string(),
    competitor_name: z.string(),
    url: z.string().nullable(),
    price: money,
    regular_price: money.nullable(),
    currency,
    shipping_cost: money.nullable().meta({ description: "0: free delivery; null: unknown" }),
    total_price: money.nullable().meta({ description: "price + shipping_cost; null while shipping is unknown" }),
    unit_price: orNull(UnitPrice).meta({ description: "null without a quantity and unit" }),
    lowest_price_30d: money.nullable().meta({
      description:
        "The lowest price of this offer in the 30 days before its current price took effect (the EU's prior price for a " +
        "reduction); null when the price never changed (or its currency did) since it was first seen",
    }),
    seller: z.string().nullable().meta({ description: "Who sells it on the competitor's site; null when not given" }),
    condition: OfferCondition,
    in_stock: z.boolean().meta({ description: "As last read: a check that is not ok leaves it as it was" }),
    check_status: CheckStatus,
    previous_price: money.nullable().meta({ description: "The price before the latest change" }),
    price_changed_at: timestamp.nullable(),
    checked_at: timestamp.meta({ description: "The latest check, whatever its check_status" }),
    converted: orNull(ConvertedPrice)
      .optional()
      .meta({ description: "Only with `?currency=`: the offer in that currency; null when there is no rate for its currency" }),
  })
  .meta({ id: "Offer", description: "A competitor's current offer" });
export type OfferView = z.infer<typeof Offer>;

const LowestOffer = z
  .object({
    competitor_id: z.string(),
    price: money,
    total_price: money.nullable().meta({ description: "price + shipping_cost; null while shipping is unknown (price was compared)" }),
    currency,
  })
  .meta({
    id: "LowestOffer",
    description:
      "The lowest offer a buyer can take: in stock, compared by total_price where shipping is known, else by price; with " +
      "`?currency=`, across every offer with a rate, in that currency (converted figures)",
  });

/**
 * min/max are taken over the offers in the product's most common currency (ties go to the alphabetically first code),
 * named by `currency`, in stock or not, shipping excluded: the range of listed prices. lowest_offer is what a buyer
 * pays least for: in stock, shipping included where known, across currencies when converted (docs/decisions.md).
 */
export const Summary = z
  .object({
    min_price: money.nullable().meta({
      description:
        "The lowest listed price (shipping excluded, in stock or not) among the offers in `currency`; offers in other " +
        "currencies are left out unless `?currency=` converts them. The price to quote is lowest_offer's",
    }),
    max_price: money.nullable().meta({ description: "The highest listed price, over the same offers as min_price" }),
    currency: currency
      .nullable()
      .meta({ description: "The product's most common offer currency (or the one asked for); min/max are over its offers only" }),
    offer_count: z.int(),
    in_stock_count: z.int(),
    lowest_competitor_id: z.string().nullable().meta({ description: "The competitor of min_price's offer" }),
    lowest_offer: orNull(LowestOffer).meta({
      description:
        "The cheapest offer in stock, by total_price where shipping is known (else price): without `?currency=`, among " +
        "the in-stock offers in `currency` (when none of those is in stock, in the most common currency of those that are); " +
        "with it, across every offer that has a rate, converted. null when none is in stock",
    }),
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
