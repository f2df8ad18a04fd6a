import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { mostInOneWindow } from "../../bench/load/soak-checks.ts";
import {
  asJson,
  BASE,
  type Costs,
  D1_TABLES,
  figuresAt,
  LIMITS,
  MEASURED_ONLY,
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
import { DELIVERY_ARCHIVE_AFTER_MS, HISTORY_ARCHIVE_AFTER_MS, OFFER_DAYS_KEPT_MS } from "../../src/events/retention.ts";
import { DAY_MS, DAY_SECONDS, MINUTE_MS } from "../../src/platform/time.ts";
import { DELIVERY_QUEUES } from "../../src/webhooks/delivery/queues.ts";

/** The arithmetic behind docs/scale.md (npm run simulate), fed by docs/costs.json, and the soak's over-limit check. */
describe("the scale model", () => {
  const costs = readCosts();

  /** docs/costs.json with one operation's field changed by `change` (a number: times that factor), at every size. */
  const withFigure = (
    name: (typeof OPERATIONS)[number],
    field: "do_rows_written" | "d1_statements" | "d1_ms",
    change: number | ((value: number) => number),
  ): Costs => {
    const changed = typeof change === "number" ? (value: number) => value * change : change;
    const op = costs.operations[name];
    const by = Object.fromEntries(Object.entries(op.by_products).map(([size, cost]) => [size, { ...cost, [field]: changed(cost[field]) }]));
    return { ...costs, operations: { ...costs.operations, [name]: { ...op, [field]: changed(op[field]), by_products: by } } };
  };

  /** docs/costs.json with a table's measured bytes per row replaced (undefined: not measured). */
  const withBytes = (table: string, bytes: number | undefined): Costs => {
    const replaced = (stored: Costs["storage"]["by_products"][string]) => ({
      ...stored,
      d1_bytes_per_row: { ...stored.d1_bytes_per_row, [table]: bytes! },
    });
    const by = Object.fromEntries(Object.entries(costs.storage.by_products).map(([size, stored]) => [size, replaced(stored)]));
    return { ...costs, storage: { ...replaced(costs.storage), by_products: by } };
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
    // Beside them, what the bench measures and the model does not price (an export's steps), or nothing else.
    const measuredOnly: readonly string[] = MEASURED_ONLY;
    expect(
      Object.keys(costs.operations)
        .filter((name) => !measuredOnly.includes(name))
        .sort(),
    ).toEqual([...OPERATIONS].sort());
    expect(costs.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(simulate(costs).inputs).toBe(`docs/costs.json@${costs.commit}`);
  });

  it("sizes every table the bench measures, each in a database of both plans", () => {
    for (const plan of [BASE, SPLIT]) {
      const model = simulate(costs, WORKLOAD, plan);
      expect(Object.keys(model.d1GbByTable).sort()).toEqual([...D1_TABLES].sort());
      for (const table of D1_TABLES) {
        expect(model.d1GbByTable[table], table).toBeGreaterThan(0);
        expect(Object.keys(plan.databases), table).toContain(plan.tables[table]);
      }
      const inDatabases = Object.entries(model.d1GbByDatabase).reduce((n, [name, gb]) => n + gb * plan.databases[name]!.shards, 0);
      expect(inDatabases).toBeCloseTo(model.d1Gb, 6);
    }
    // The alert windows' tables go with the price history they summarise (docs/scale.md's plan).
    expect(SPLIT.tables.offer_price_days).toBe(SPLIT.tables.price_history);
    expect(SPLIT.tables.offer_price_far).toBe(SPLIT.tables.price_history);
  });

  it("holds the alert windows' tables in a database of their own in the base plan, and sizes D1 by its largest database", () => {
    const model = simulate(costs);
    for (const table of D1_TABLES)
      expect(BASE.tables[table], table).toBe(table === "offer_price_days" || table === "offer_price_far" ? "alerts" : "main");
    expect(model.d1GbByDatabase.alerts).toBeCloseTo(model.d1GbByTable.offer_price_days + model.d1GbByTable.offer_price_far, 6);
    expect(model.d1GbByDatabase.main! + model.d1GbByDatabase.alerts!).toBeCloseTo(model.d1Gb, 6);
    const size = model.limits.find((limit) => limit.name === "D1 size after a year, largest database (GB)")!;
    expect(size.used).toBeCloseTo(Math.max(model.d1GbByDatabase.main!, model.d1GbByDatabase.alerts!), 6);
    // A serial-time line for each database.
    for (const database of ["main", "alerts"])
      expect(model.limits.some((limit) => limit.name.startsWith(`D1 serial time per second, database "${database}"`))).toBe(true);
  });

  it("counts an operation's time in the alert windows' database there, and the rest on the main one", () => {
    /** docs/costs.json with cron_run spending `ms` of its D1 time in the alert windows' database, at every size. */
    const withAlertsTime = (ms: number): Costs => {
      const op = costs.operations.cron_run;
      const by = Object.fromEntries(Object.entries(op.by_products).map(([size, cost]) => [size, { ...cost, d1_ms_alerts: ms }]));
      return { ...costs, operations: { ...costs.operations, cron_run: { ...op, d1_ms_alerts: ms, by_products: by } } };
    };
    const none = simulate(withAlertsTime(0));
    expect(none.alertsTimeMeasured).toBe(true);
    expect(none.d1BusyByDatabase.alerts).toBe(0);
    const ms = 0.5 * figuresAt(costs.operations.cron_run, WORKLOAD.products).d1_ms;
    const some = simulate(withAlertsTime(ms));
    expect(some.d1BusyByDatabase.alerts).toBeCloseTo((some.rate.cron_run * ms) / 1000, 9);
    expect(some.d1BusyByDatabase.main! + some.d1BusyByDatabase.alerts!).toBeCloseTo(none.d1BusyByDatabase.main!, 9);
    // The split plan holds the day rows with the history they summarise: their time goes there.
    const split = simulate(withAlertsTime(ms), WORKLOAD, SPLIT);
    expect(split.d1BusyByDatabase.history).toBeGreaterThan(simulate(withAlertsTime(0), WORKLOAD, SPLIT).d1BusyByDatabase.history!);
  });

  it("reads a docs/costs.json measured before the alert windows' database had its own time: all of it on the main one", () => {
    const stripped = (cost: Costs["operations"]["cron_run"]["by_products"][string]) => {
      const { d1_ms_alerts: _, ...rest } = cost;
      return rest;
    };
    const old = {
      ...costs,
      operations: Object.fromEntries(
        Object.entries(costs.operations).map(([name, op]) => [
          name,
          {
            ...stripped(op),
            by_products: Object.fromEntries(Object.entries(op.by_products).map(([size, cost]) => [size, stripped(cost)])),
          },
        ]),
      ),
    } as Costs;
    const model = simulate(old);
    expect(model.alertsTimeMeasured).toBe(false);
    expect(model.d1BusyByDatabase.alerts).toBe(0);
    expect(Number.isFinite(model.d1BusyByDatabase.main)).toBe(true);
  });

  it("sizes the alert windows' day rows from their measured bytes and OFFER_DAYS_KEPT_MS, their far rows one per offer", () => {
    const base = simulate(costs);
    const bytes = costs.storage.d1_bytes_per_row;
    const offers = (WORKLOAD.products * costs.storage.d1_rows.offers!) / costs.storage.d1_rows.products!;
    const eventsPerDay = WORKLOAD.eventsPerSecond * DAY_SECONDS;
    // At most one row per offer and UTC day, kept OFFER_DAYS_KEPT_MS; a far row per offer that changed in the year.
    expect(base.d1GbByTable.offer_price_days).toBeCloseTo(
      (Math.min(eventsPerDay, offers) * (OFFER_DAYS_KEPT_MS / DAY_MS) * bytes.offer_price_days!) / 1e9,
      6,
    );
    expect(base.d1GbByTable.offer_price_far).toBeCloseTo((Math.min(offers, eventsPerDay * 365) * bytes.offer_price_far!) / 1e9, 6);
    const doubled = simulate(withBytes("offer_price_days", 2 * bytes.offer_price_days!));
    expect(doubled.d1GbByTable.offer_price_days).toBeCloseTo(2 * base.d1GbByTable.offer_price_days, 6);
    expect(doubled.d1Gb - base.d1Gb).toBeCloseTo(base.d1GbByTable.offer_price_days, 6);
    const far = simulate(withBytes("offer_price_far", 2 * bytes.offer_price_far!));
    expect(far.d1GbByTable.offer_price_far).toBeCloseTo(2 * base.d1GbByTable.offer_price_far, 6);
  });

  it("refuses a docs/costs.json without a table's measured bytes, naming the bench that measures them", () => {
    const dir = mkdtempSync(join(tmpdir(), "costs-"));
    try {
      for (const bytes of [undefined, 0]) {
        const file = join(dir, "costs.json");
        writeFileSync(file, JSON.stringify(withBytes("offer_price_far", bytes)));
        expect(() => readCosts(pathToFileURL(file))).toThrow(/offer_price_far: run npm run bench -- --costs/);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("takes each figure from the file: a product read's object rows past its bench key's block share, that many more rows and more cost", () => {
    const base = simulate(costs);
    // The bench fills each key's block before it measures (bench/modes/costs.ts), so a product read's own rows may be
    // none: give it `own` rows past the block share the model takes off, and the model counts exactly those more.
    const block = figuresAt(costs.operations.data_request_admitted, WORKLOAD.products).do_rows_written;
    const file = Math.max(0, figuresAt(costs.operations.get_product, WORKLOAD.products).do_rows_written - block);
    const own = 3;
    const raised = simulate(withFigure("get_product", "do_rows_written", () => block + own));
    expect(raised.perSecond.do_rows_written - base.perSecond.do_rows_written).toBeCloseTo(base.rate.get_product * (own - file), 6);
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
        "20": { ...costs.operations.list_products_gzip, r2_class_b: 5 },
      },
    };
    expect(figuresAt(grows, 40).r2_class_b).toBeCloseTo(11, 10);
    const shrinks = {
      ...grows,
      by_products: { "10": { ...grows.by_products["10"], r2_class_b: 5 }, "20": { ...grows.by_products["20"], r2_class_b: 2 } },
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
    // A third more rows at the larger size is the sample's spread, not a catalogue read: nothing extrapolated either.
    const spread = { ...flat, by_products: { ...flat.by_products, "20": { ...flat.by_products["20"], d1_rows_read: 5.4 } } };
    expect(figuresAt(spread, 1000).cpu_ms).toBe(120);
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

  // Issue 46's targets at the target load, from the docs/costs.json the bench wrote: a figure that moves a target out
  // of reach (a measured cost, a price, a limit) fails here. At 2026-12-08 01:40 the model says $2.46 per million
  // requests, every limit at most 0.48 ×.
  it("meets the contract's targets at the target load for a year: at most $2.50 per million requests, every limit at most 0.5 ×", () => {
    const model = simulate(costs);
    expect(model.perMillionRequests).toBeLessThanOrEqual(2.5);
    for (const limit of model.limits) expect(limit.ratio, limit.name).toBeLessThanOrEqual(0.5);
  });

  // What D1 keeps of what grows with time (src/events/retention.ts): the windows are the model's, so a window that grows
  // back, or an archive that can no longer keep up with a shorter one, fails here.
  it("keeps each archive's cron at most half busy keeping D1's windows", () => {
    const model = simulate(costs);
    const kept = model.limits.filter((limit) => /archived per (day|run)/.test(limit.name));
    expect(kept.map((limit) => limit.name.split(":")[0])).toEqual(
      expect.arrayContaining([
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

  // The alert windows' day rows in a database of their own, at the bytes the bench measured as migrations-alerts/ stores
  // them (94 B a day row, 155 B a far row: 3.5 GB after a year), and the main one without them (4.7 GB).
  it("keeps D1's largest database at most half full after a year", () => {
    const model = simulate(costs);
    expect(Object.keys(model.d1GbByDatabase).sort()).toEqual(["alerts", "main"]);
    const size = model.limits.find((limit) => limit.name === "D1 size after a year, largest database (GB)")!;
    expect(size.ratio).toBeLessThanOrEqual(0.5);
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
