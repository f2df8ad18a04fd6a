import type { Context, Hono } from "hono";

/** One group of routes under its prefix and who may call it; `link` names it in GET /'s links (left out for machine-only groups). */
export interface RouteGroup {
  path: string;
  // biome-ignore lint/suspicious/noExplicitAny: each group is a differently typed OpenAPIHono app
  routes: Hono<any, any, any>;
  access: string;
  link?: string;
}

/** GET /: where to go next, for a person or a program that found the API's root, built from the app's route table. */
export const home = (groups: readonly RouteGroup[]) => {
  const links: Record<string, string> = {};
  for (const { path, link } of groups) if (link) links[link] = path;
  links.openapi = "/openapi.json";
  return (c: Context) =>
    c.json(
      {
        name: "Price Data API",
        description:
          "Competitor prices for your products. Data routes take an API key; keys, webhooks and the account take an account login.",
        links,
        routes: groups.map(({ path, access }) => ({ path, access })),
      },
      200,
    );
};
