import type { OAuthHelpers } from "@cloudflare/workers-oauth-provider";

/**
 * A revoked connector key's grant, ended in the library's storage too: its key's object already refuses the grant's
 * access tokens on their next request, and this makes a refresh fail (`invalid_grant`), so the client asks its user to
 * connect again rather than refreshing into refusals. The grant's user is the key (src/connect/service.ts); the
 * request's services carry the library's storage (src/pipeline/services.ts), so this folder names no connect.
 */
export async function endConnectorGrants(oauth: OAuthHelpers, keyId: string): Promise<void> {
  const { items } = await oauth.listUserGrants(keyId);
  await Promise.all(items.map((grant) => oauth.revokeGrant(grant.id, keyId)));
}
