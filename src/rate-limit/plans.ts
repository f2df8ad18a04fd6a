import type { PlanName } from "../platform/tables.ts";
import type { Limits } from "./types.ts";

/** Spec section 8. */
export const PLAN_LIMITS: Record<PlanName, Limits> = {
  free: { per_minute: 10, per_hour: 600, per_day: 14_400 },
  standard: { per_minute: 60, per_hour: 3_600, per_day: 86_400 },
  premium: { per_minute: 300, per_hour: 18_000, per_day: 432_000 },
};
