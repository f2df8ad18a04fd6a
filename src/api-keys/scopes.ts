/**
 * What an API key may read. Each data route needs one scope; a key holds a non-empty subset (all by default).
 * The key's rate-limit object compares them on each admission (src/api-keys/object/key-object.ts).
 */
export const KEY_SCOPES = ["products:read", "history:read", "events:read"] as const;
export type KeyScope = (typeof KEY_SCOPES)[number];

/** The scope a data route needs, from its path; undefined for a path that is not a data route. */
export function scopeForPath(path: string): KeyScope | undefined {
  if (/^\/products\/[^/]+\/history\/?$/.test(path)) return "history:read";
  if (/^\/(products|competitors)(\/[^/]+)?\/?$/.test(path)) return "products:read";
  if (/^\/events(\/stream)?\/?$/.test(path)) return "events:read";
  return undefined;
}

/** Whether a key holding `scopes` (null or absent: all of them) may read what `needed` guards. */
export const holdsScope = (scopes: readonly string[] | null | undefined, needed: string): boolean => !scopes || scopes.includes(needed);

/** The refusal's detail, for a REST route (a 403) and an MCP tool (a tool error) alike. */
export const missingScopeDetail = (needed: string, what = "route"): string =>
  `This API key lacks the ${needed} scope this ${what} needs; add it to the key's scopes (PATCH /api-keys/{id}) or use another key.`;
