import { z } from "zod";
import { jsonObject } from "../http/validation.ts";
import { orNull } from "../http/wire.ts";
import { IngestionResult, observationsBody } from "../observations/schema.ts";
import { TestDeliveriesQueued } from "../webhooks/schema.ts";

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

/** POST /test/observations' answer: the ingestion's, and what its deliveries to the account's test webhooks met. */
export const SandboxIngestionResult = IngestionResult.extend({
  test_deliveries: orNull(TestDeliveriesQueued).meta({
    description: "null when the queue makes these deliveries (this call's own fan-out failed); they count in the same budget there",
  }),
}).meta({ id: "SandboxIngestionResult" });
