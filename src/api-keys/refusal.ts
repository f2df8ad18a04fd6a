import type { CheckedAdmission, KeyRefusal } from "./object/types.ts";
import { missingScopeDetail } from "./scopes.ts";

/** A key's object refused the request: what the caller is told (a 401, or a 403 for `forbidden`), and how to go on. */
export function keyRefusalDetail(refused: Exclude<CheckedAdmission, { status: "active" }>): string {
  switch (refused.status) {
    case "forbidden":
      return forbiddenDetail(refused.reason);
    case "expired":
      return `This API key expired at ${new Date(refused.expiresAt).toISOString()}; use the key that replaced it, or create a new one.`;
    case "revoked":
      return "This API key has been revoked; create a new one.";
    case "unknown":
      return "This API key is not recognised.";
  }
}

function forbiddenDetail(reason: KeyRefusal): string {
  switch (reason.kind) {
    case "environment":
      return (
        `This is a ${reason.key} key, and this route takes ${reason.needed} keys only (pda_${reason.needed}_…); use one of your ` +
        `account's ${reason.needed} keys (POST /api-keys with "environment": "${reason.needed}" makes one).`
      );
    case "scope":
      return missingScopeDetail(reason.needed);
    case "ip":
      return `This API key may not be used from ${reason.ip}; add the address to the key's allowed_ips (PATCH /api-keys/{id}) or call from an allowed one.`;
  }
}
