import type { Context } from "hono";

/** GET /: where to go next, for a person or a program that found the API's root. */
export const home = (c: Context) =>
  c.json(
    {
      name: "Price Data API",
      description:
        "Competitor prices for your products. Data routes take an API key; keys, webhooks and the account take an account login.",
      links: {
        products: "/products",
        competitors: "/competitors",
        account: "/account",
        api_keys: "/api-keys",
        webhooks: "/webhooks",
        dashboard: "/dashboard",
        reference: "/docs",
        openapi: "/openapi.json",
      },
    },
    200,
  );
