import { z } from "zod";
import { jsonObject } from "../http/validation.ts";
import { observationsBody } from "../observations/schema.ts";

/** POST /test/observations: the body of POST /admin/observations, with fewer observations a call. */
export const MAX_TEST_OBSERVATIONS = 100;

export const testObservationsBody = z.strictObject(
  {
    observations: observationsBody.shape.observations.max(MAX_TEST_OBSERVATIONS, {
      error: `must hold at most ${MAX_TEST_OBSERVATIONS} observations in test mode; split them into several calls`,
    }),
  },
  jsonObject,
);
