import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { mostInOneWindow } from "../../bench/load/soak-checks.ts";
import { asJson, INPUTS, type Inputs, overage, queueBatchSize, simulate } from "../../scripts/simulate.ts";
import {
  D1_QUERIES_PER_DELIVERY_BATCH,
  DELIVERY_ARCHIVE_AFTER_MS,
  EVENTS_IN_D1_MS,
  HISTORY_ARCHIVE_AFTER_MS,
} from "../../src/events/retention.ts";

/** The arithmetic behind docs/scale.md (npm run simulate) and the soak's over-limit check. */
describe("the scale model", () => {
  it("charges only what exceeds the included amount", () => {
    expect(overage(5e6, 10e6, 0.3)).toBe(0);
    expect(overage(12e6, 10e6, 0.3)).toBeCloseTo(0.6, 10);
  });

  it("follows its inputs: twice the traffic writes twice the rows, and a million requests never cost more (storage and keys are shared)", () => {
    const base = simulate(INPUTS);
    // Twice the isolates too: each reads the snapshot pointer once a second whatever its traffic.
    const doubled: Inputs = {
      ...INPUTS,
      workload: { ...INPUTS.workload, requestsPerSecond: 2 * INPUTS.workload.requestsPerSecond, isolates: 2 * INPUTS.workload.isolates },
    };
    const twice = simulate(doubled);
    expect(base.objectWritesPerSecond).toBeCloseTo(10_000 * 0.95 * INPUTS.design.objectRowsWrittenPerAdmission, 6);
    expect(twice.objectWritesPerSecond).toBe(2 * base.objectWritesPerSecond);
    expect(twice.cost.objectRowsWritten).toBeGreaterThan(2 * base.cost.objectRowsWritten - 1);
    expect(twice.perMillionRequests).toBeGreaterThan(0.5 * base.perMillionRequests);
    expect(twice.perMillionRequests).toBeLessThanOrEqual(base.perMillionRequests);
  });

  it("counts keys alive from the idle window: every key when each is used far more often than the window", () => {
    const busy: Inputs = { ...INPUTS, workload: { ...INPUTS.workload, keys: 1000 } };
    expect(simulate(busy).objectsAlive).toBeCloseTo(1000, 0);
    expect(simulate(INPUTS).objectsAlive).toBeCloseTo(1e6 * (1 - Math.exp(-0.01 * 70)), 0);
  });

  it("ranks the limits by pressure, highest first", () => {
    const ratios = simulate(INPUTS).limits.map((limit) => limit.ratio);
    expect([...ratios].sort((a, b) => b - a)).toEqual(ratios);
  });

  it("follows the code's archive settings: D1 holds a day of events and the history of HISTORY_ARCHIVE_AFTER_MS, whatever the time", () => {
    const { d1Gb, d1DeliveriesGb } = simulate(INPUTS);
    const bytes = INPUTS.design;
    const eventsPerDay = INPUTS.workload.products * INPUTS.workload.offersPerProduct * INPUTS.workload.changesPerOfferPerDay;
    const recent =
      (eventsPerDay *
        ((EVENTS_IN_D1_MS / 86_400_000) * bytes.d1BytesPerEvent + (HISTORY_ARCHIVE_AFTER_MS / 86_400_000) * bytes.d1BytesPerHistoryRow)) /
      1e9;
    expect(d1Gb).toBeGreaterThan(recent);
    expect(d1Gb).toBeLessThan(recent + d1DeliveriesGb + 2.5); // + the last minutes of delivery attempts, the catalogue and keys (and the archive's small index)
    const size = simulate(INPUTS).limits.find((limit) => limit.name.startsWith("D1 size after a year"))!;
    expect(size.ratio).toBeLessThan(0.5);
  });

  it("follows the code's delivery figures: round trips per queue batch of wrangler.toml's size, attempts in D1 for DELIVERY_ARCHIVE_AFTER_MS", () => {
    expect(queueBatchSize('[[queues.consumers]]\nqueue = "a"\nmax_batch_size = 25\n\n[[queues.consumers]]\nmax_batch_size = 3')).toBe(25);
    expect(INPUTS.workload.deliveriesPerQueueBatch).toBe(queueBatchSize());
    const model = simulate(INPUTS);
    expect(model.deliveryRecordsPerSecond).toBeCloseTo((model.deliveriesPerSecond / queueBatchSize()) * D1_QUERIES_PER_DELIVERY_BATCH, 6);
    expect(model.d1DeliveriesGb).toBeCloseTo(
      (model.deliveriesPerSecond * (DELIVERY_ARCHIVE_AFTER_MS / 1000) * INPUTS.design.d1BytesPerDelivery) / 1e9,
      6,
    );
    // Twice the queue batch: half the consumer's round trips.
    const larger = simulate({ ...INPUTS, workload: { ...INPUTS.workload, deliveriesPerQueueBatch: 2 * queueBatchSize() } });
    expect(larger.deliveryRecordsPerSecond).toBeCloseTo(model.deliveryRecordsPerSecond / 2, 6);
  });

  it("holds every limit under half at the default inputs, for the whole year", () => {
    for (const limit of simulate(INPUTS).limits) expect(limit.ratio, limit.name).toBeLessThan(0.5);
  });

  it("prints every limit as JSON with --json", () => {
    const printed = JSON.parse(execFileSync(process.execPath, ["scripts/simulate.ts", "--json"], { encoding: "utf8" })) as ReturnType<
      typeof asJson
    >;
    expect(printed).toEqual(JSON.parse(JSON.stringify(asJson(simulate(INPUTS)))));
    expect(printed.limits.length).toBeGreaterThan(8);
    for (const limit of printed.limits) {
      expect(Object.keys(limit).sort()).toEqual(["limit", "name", "ratio", "used"]);
      expect(limit.ratio).toBeCloseTo(limit.used / limit.limit, 10);
    }
    expect(printed.cost_per_million_requests).toBeGreaterThan(0);
  });
});

describe("the soak's over-limit check", () => {
  it("counts only admissions that certainly shared a 60 s window", () => {
    const at = (sent: number, latency = 10) => ({ sentMs: sent, receivedMs: sent + latency });
    expect(mostInOneWindow([at(0), at(1000), at(59_000)])).toBe(3);
    // The third answer arrived 60 s after the first was sent: the server may have admitted them a window apart.
    expect(mostInOneWindow([at(0), at(1000), at(59_995)])).toBe(2);
    expect(mostInOneWindow([at(0), at(61_000), at(62_000)])).toBe(2);
    expect(mostInOneWindow([])).toBe(0);
  });
});
