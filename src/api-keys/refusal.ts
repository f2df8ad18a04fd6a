import { unauthorized } from "../auth/idp.ts";
import { ApiError } from "../http/errors.ts";
import type { CheckedAdmission, KeyRefusal } from "./object/types.ts";
import { missingScopeDetail } from "./scopes.ts";

type Refused = Exclude<CheckedAdmission, { status: "active" }>;

/**
 * A key's object refused the request: the caller's answer, a 403 for `forbidden` (the key works, not here: its
 * environment, scope or address) and a 401 for a key that does not work, each saying how to go on.
 */
export const keyRefusal = (refused: Refused): ApiError =>
  refused.status === "forbidden" ? new ApiError(403, forbiddenDetail(refused.reason)) : unauthorized(notWorkingDetail(refused), true);

function notWorkingDetail(refused: Exclude<Refused, { status: "forbidden" }>): string {
  switch (refused.status) {
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
