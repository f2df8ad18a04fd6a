import type { Context, MiddlewareHandler } from "hono";
import { ApiError } from "./errors.ts";

/**
 * RFC 9110 `Accept` checked before a route runs: a request whose Accept admits none of the media types the route
 * answers with (`Accept: text/csv` on a JSON route) is 406, naming them, instead of JSON it did not ask for. No Accept
 * (or none that parses), wildcards (any type, `application/*`) and q-values (a type at q=0 is refused) are read as the
 * RFC has them. Which types a route answers with comes from `servedBy` (the route's declaration); a request it says
 * nothing of (an undeclared page, 404, 405) is not checked.
 */
export function acceptable(servedBy: (c: Context) => readonly string[] | undefined): MiddlewareHandler {
  return async (c, next) => {
    const accept = c.req.header("Accept") ?? "";
    const ranges = mediaRanges(accept);
    const served = ranges.length === 0 ? undefined : servedBy(c);
    if (served === undefined || served.length === 0 || served.some((type) => admits(ranges, type))) return next();
    throw new ApiError(
      406,
      `The Accept header (${accept}) admits none of what ${c.req.method} ${c.req.path} answers with: ${served.join(" or ")}. ` +
        `Send Accept: ${served[0]} (or */*), or leave Accept out.`,
    );
  };
}

interface MediaRange {
  type: string;
  subtype: string;
  q: number;
}

function mediaRanges(accept: string): MediaRange[] {
  return accept.split(",").flatMap((part) => {
    const [range = "", ...parameters] = part.split(";").map((piece) => piece.trim());
    const [type, subtype] = range.toLowerCase().split("/");
    if (!type || !subtype) return [];
    const qParameter = parameters.find((parameter) => /^q\s*=/i.test(parameter));
    const q = qParameter === undefined ? 1 : Number(qParameter.replace(/^q\s*=\s*/i, ""));
    return [{ type, subtype, q: Number.isNaN(q) ? 1 : q }];
  });
}

/** Whether the ranges admit `mediaType`: the most specific that matches it (exact, then `type/*`, then any) has q above 0. */
function admits(ranges: readonly MediaRange[], mediaType: string): boolean {
  const [type, subtype] = mediaType.toLowerCase().split("/");
  const specificity = (range: MediaRange) =>
    range.type === type && range.subtype === subtype ? 3 : range.type === type && range.subtype === "*" ? 2 : range.type === "*" ? 1 : 0;
  let best: MediaRange | undefined;
  for (const range of ranges) if (specificity(range) > 0 && (best === undefined || specificity(range) > specificity(best))) best = range;
  return best !== undefined && best.q > 0;
}
