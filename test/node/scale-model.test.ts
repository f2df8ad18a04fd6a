import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { mostInOneWindow } from "../../bench/load/soak-checks.ts";
import {
  asJson,
  type Costs,
  figuresAt,
  LIMITS,
  OPERATIONS,
  overage,
  PRICES,
  queueBatchSize,
  readCosts,
  SPLIT,
  scaled,
  simulate,
  WORKLOAD,
} from "../../scripts/simulate.ts";
import { DELIVERY_ARCHIVE_AFTER_MS, HISTORY_ARCHIVE_AFTER_MS } from "../../src/events/retention.ts";
import { DAY_MS, MINUTE_MS } from "../../src/platform/time.ts";
import { DELIVERY_QUEUES } from "../../src/webhooks/delivery/queues.ts";

/** The arithmetic behind docs/scale.md (npm run simulate), fed by docs/costs.json, and the soak's over-limit check. */
describe("the scale model", () => {
  const costs = readCosts();

  /** docs/costs.json with one operation's field times `factor`, at every size. */
  const withFigure = (name: (typeof OPERATIONS)[number], field: "do_rows_written" | "d1_statements" | "d1_ms", factor: number): Costs => {
    const op = costs.operations[name];
    const by = Object.fromEntries(Object.entries(op.by_products).map(([size, cost]) => [size, { ...cost, [field]: cost[field] * factor }]));
    return { ...costs, operations: { ...costs.operations, [name]: { ...op, [field]: op[field] * factor, by_products: by } } };
  };

  it("charges only what exceeds the included amount", () => {
    const at = (value: number) => ({ value, source: "" });
    expect(overage(5e6, at(10e6), at(0.3))).toBe(0);
    expect(overage(12e6, at(10e6), at(0.3))).toBeCloseTo(0.6, 10);
  });

  it("names a published page beside every limit and price", () => {
    for (const figure of [...Object.values(LIMITS), ...Object.values(PRICES)])
      expect(figure.source).toMatch(/^https:\/\/developers\.cloudflare\.com\//);
  });

  it("reads every operation of the contract from docs/costs.json, with the commit it measured", () => {
    expect(Object.keys(costs.operations).sort()).toEqual([...OPERATIONS].sort());
    expect(costs.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(simulate(costs).inputs).toBe(`docs/costs.json@${costs.commit}`);
  });

  it("takes each figure from the file: a product read's object rows past its bench key's block share, that many more rows and more cost", () => {
    const base = simulate(costs);
    const factor = 40;
    const raised = simulate(withFigure("get_product", "do_rows_written", factor));
    const file = figuresAt(costs.operations.get_product, WORKLOAD.products).do_rows_written;
    expect(file).toBeGreaterThan(0);
    expect(raised.perSecond.do_rows_written - base.perSecond.do_rows_written).toBeCloseTo(base.rate.get_product * file * (factor - 1), 6);
    expect(raised.cost.objectRowsWritten).toBeGreaterThan(base.cost.objectRowsWritten);
  });

  it("prices a key's object rows at the key's own rate: under a request a minute, a block of one, a row an admission of any route", () => {
    const { rate } = simulate(costs);
    const admitted = rate.data_request_admitted + rate.get_product + rate.events_page + rate.product_history + rate.mcp_tool_call;
    expect((admitted * 60) / WORKLOAD.keys).toBeLessThan(1);
    const { perSecond } = simulate(withFigure("data_request_admitted", "do_rows_written", 0));
    expect(perSecond.do_rows_written).toBeGreaterThanOrEqual(admitted);
  });

  it("extrapolates a figure that grows with the catalogue along the two sizes measured, and never below the larger", () => {
    const grows = {
      ...costs.operations.list_products_gzip,
      by_products: {
        "10": { ...costs.operations.list_products_gzip, r2_class_b: 2 },
        "20": { ...costs.operations.list_products_gzip, r2_class_b: 3 },
      },
    };
    expect(figuresAt(grows, 40).r2_class_b).toBeCloseTo(5, 10);
    const shrinks = {
      ...grows,
      by_products: { "10": { ...grows.by_products["10"], r2_class_b: 3 }, "20": { ...grows.by_products["20"], r2_class_b: 2 } },
    };
    expect(figuresAt(shrinks, 40).r2_class_b).toBe(2);
  });

  it("extrapolates CPU only for an operation that reads more at the larger size: noise in work that does not grow is not", () => {
    const flat = {
      ...costs.operations.stream_connection_minute,
      by_products: {
        "10": { ...costs.operations.stream_connection_minute, d1_rows_read: 4, r2_class_b: 0, cpu_ms: 40 },
        "20": { ...costs.operations.stream_connection_minute, d1_rows_read: 4, r2_class_b: 0, cpu_ms: 120 },
      },
    };
    expect(figuresAt(flat, 1000).cpu_ms).toBe(120);
    // A pointer re-check caught in one sample of 40 requests (0.025 a request) is time, not data: nothing extrapolated.
    const pointer = { ...flat, by_products: { ...flat.by_products, "20": { ...flat.by_products["20"], r2_class_b: 0.025 } } };
    expect(figuresAt(pointer, 1000).r2_class_b).toBe(0.025);
    expect(figuresAt(pointer, 1000).cpu_ms).toBe(120);
    const reading = { ...flat, by_products: { ...flat.by_products, "20": { ...flat.by_products["20"], r2_class_b: 1 } } };
    expect(figuresAt(reading, 40).cpu_ms).toBeCloseTo(280, 10);
  });

  it("follows the workload: ten times the load, ten times the statements; D1's serial time spread by the split plan", () => {
    const base = simulate(costs);
    const ten = simulate(costs, scaled(WORKLOAD, 10));
    expect(ten.perSecond.d1_statements).toBeGreaterThanOrEqual(10 * base.perSecond.d1_statements * 0.999);
    const split = simulate(costs, scaled(WORKLOAD, 10), SPLIT);
    const busiest = (busy: Record<string, number>) => Math.max(...Object.values(busy));
    expect(busiest(split.d1BusyByDatabase)).toBeLessThan(busiest(ten.d1BusyByDatabase));
    // D1 time added to a data request (its statements', each at max(1 ms, measured)) shows in D1's serial time.
    const more = simulate(withFigure("product_history", "d1_ms", 2));
    expect(more.d1BusyByDatabase.main).toBeGreaterThan(base.d1BusyByDatabase.main!);
  });

  it("reads the queue's batch size from wrangler.toml", () => {
    expect(queueBatchSize('[[queues.consumers]]\nqueue = "a"\nmax_batch_size = 25\n\n[[queues.consumers]]\nmax_batch_size = 3')).toBe(25);
  });

  it("ranks the limits by pressure, highest first", () => {
    const ratios = simulate(costs).limits.map((limit) => limit.ratio);
    expect([...ratios].sort((a, b) => b - a)).toEqual(ratios);
  });

  // A child process running the model: seconds on a busy machine, past the default 5 s.
  it("prints every limit as JSON with --json, naming its inputs", { timeout: 30_000 }, () => {
    const printed = JSON.parse(execFileSync(process.execPath, ["scripts/simulate.ts", "--json"], { encoding: "utf8" })) as ReturnType<
      typeof asJson
    >;
    expect(printed).toEqual(JSON.parse(JSON.stringify(asJson(simulate(costs)))));
    expect(printed.inputs).toBe(`docs/costs.json@${costs.commit}`);
    for (const limit of printed.limits) {
      expect(Object.keys(limit).sort()).toEqual(["limit", "name", "ratio", "used"]);
      expect(limit.ratio).toBeCloseTo(limit.used / limit.limit, 10);
    }
    expect(printed.cost_per_million_requests).toBeGreaterThan(0);
  });

  // Issue 46's targets, NOT MET since the model reads the final tally (docs/scale.md): about $6 per million requests,
  // R2 reads of the 1 % filter (about one per product it returns) and object rows written first, D1's serial time and
  // the filtered list's subrequests above 0.5. `it.fails` keeps the check honest: it passes while a target is missed,
  // and fails the day every target holds, to be turned back into `it`.
  it.fails("meets the contract's targets at the target load for a year: at most $2.50 per million requests, every limit at most 0.5 ×", () => {
    const model = simulate(costs);
    expect(model.perMillionRequests).toBeLessThanOrEqual(2.5);
    for (const limit of model.limits) expect(limit.ratio, limit.name).toBeLessThanOrEqual(0.5);
  });

  // What D1 keeps of what grows with time (src/events/retention.ts): the windows are the model's, so a window that grows
  // back, or an archive that can no longer keep up with a shorter one, fails here.
  it("keeps D1 at most half full after a year, with each archive's cron at most half busy keeping it so", () => {
    const model = simulate(costs);
    const kept = model.limits.filter((limit) => /^D1 size after a year|archived per (day|run)/.test(limit.name));
    expect(kept.map((limit) => limit.name.split(":")[0])).toEqual(
      expect.arrayContaining([
        "D1 size after a year, largest database (GB)",
        "products whose history is archived per day",
        "webhooks whose attempts are archived per run",
        "delivery attempts archived per run",
        "events archived per day",
      ]),
    );
    for (const limit of kept) expect(limit.ratio, limit.name).toBeLessThanOrEqual(0.5);
    // At 80 minutes of attempts and 10 days of history D1 was 7.1 GB of 10 (0.71 ×): docs/scale.md says what each window is for.
    expect(DELIVERY_ARCHIVE_AFTER_MS).toBeLessThanOrEqual(30 * MINUTE_MS);
    expect(HISTORY_ARCHIVE_AFTER_MS).toBeLessThanOrEqual(3 * DAY_MS);
  });

  it("spreads the queue's consumers over the delivery queues (DELIVERY_QUEUES)", () => {
    const model = simulate(costs);
    const consumers = model.limits.find((limit) => limit.name.startsWith("queue consumers at once"))!;
    expect(consumers.used * DELIVERY_QUEUES.length).toBeCloseTo(model.consumerConcurrency, 6);
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
