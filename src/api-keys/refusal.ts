import type { CheckedAdmission } from "./object/types.ts";
import { missingScopeDetail } from "./scopes.ts";

/** A key's object refused the request: what the caller is told (a 401, or a 403 for `forbidden`), and how to go on. */
export function keyRefusalDetail(refused: Exclude<CheckedAdmission, { status: "active" }>): string {
  switch (refused.status) {
    case "forbidden":
      return refused.reason.kind === "scope"
        ? missingScopeDetail(refused.reason.needed)
        : `This API key may not be used from ${refused.reason.ip}; add the address to the key's allowed_ips (PATCH /api-keys/{id}) ` +
            "or call from an allowed one.";
    case "expired":
      return `This API key expired at ${new Date(refused.expiresAt).toISOString()}; use the key that replaced it, or create a new one.`;
    case "revoked":
      return "This API key has been revoked; create a new one.";
    case "unknown":
      return "This API key is not recognised.";
  }
}
