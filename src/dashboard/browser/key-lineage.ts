import type { ApiKey } from "./api-types.ts";

/**
 * The words before the key a rotated key replaced, on its card: "Replaces" while the old key still works (its grace),
 * "Replaced" once its grace is over, and nothing once it is revoked: a revoked key is gone, and its own row or the
 * leaked-key banner says so (a card saying it "replaces" a key the banner calls revoked reads as if both worked).
 * `predecessor` is undefined when the list does not hold it (the card then names its id).
 */
export function replacesWords(predecessor: ApiKey | undefined): string | undefined {
  if (predecessor?.status === "revoked") return undefined;
  return predecessor?.status === "expired" ? "Replaced " : "Replaces ";
}
