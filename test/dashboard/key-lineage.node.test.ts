// A rotated key's card (src/dashboard/browser/keys.ts): what it says of the key it replaced, by that key's status.
import { describe, expect, it } from "vitest";
import type { ApiKey } from "../../src/dashboard/browser/api-types.ts";
import { replacesWords } from "../../src/dashboard/browser/key-lineage.ts";

const predecessor = (status: ApiKey["status"]) => ({ status }) as ApiKey;

describe("a rotated key's card", () => {
  it("says it replaces the old key while that works, replaced it once its grace is over, and nothing once it is revoked", () => {
    expect(replacesWords(predecessor("active"))).toBe("Replaces ");
    expect(replacesWords(undefined)).toBe("Replaces ");
    expect(replacesWords(predecessor("expired"))).toBe("Replaced ");
    // The leaked-key banner (or the old key's own row) says it is revoked: the card does not say it replaces it.
    expect(replacesWords(predecessor("revoked"))).toBeUndefined();
  });
});
