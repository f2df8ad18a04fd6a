/**
 * What an API key may read. Each data route declares the one it needs (`scope` in its operation(), which the
 * document shows as its security requirement, `ApiKey: ["products:read"]`); a key holds a non-empty subset (all by
 * default). The key's object compares them on each admission (src/api-keys/object/key-object.ts); an MCP tool, per call.
 */
/** `sandbox:write`: change the account's sandbox (POST /test/observations), which only a test key may do. */
export const KEY_SCOPES = ["products:read", "history:read", "events:read", "sandbox:write"] as const;
export type KeyScope = (typeof KEY_SCOPES)[number];

/** Whether a key holding `scopes` (null or absent: all of them) may read what `needed` guards. */
export const holdsScope = (scopes: readonly string[] | null | undefined, needed: string): boolean => !scopes || scopes.includes(needed);

/** The refusal's detail, for a REST route (a 403) and an MCP tool (a tool error) alike. */
export const missingScopeDetail = (needed: string, what = "route"): string =>
  `This API key lacks the ${needed} scope this ${what} needs; add it to the key's scopes (PATCH /api-keys/{id}) or use another key.`;
