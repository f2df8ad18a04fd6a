/** The bench's command line (bench/run.ts lists it) and the sizes and times each mode reads from it. */
import { parseArgs } from "node:util";

const SIZES = {
  full: {
    webhookSamples: 30,
    loadKeys: 1000,
    connections: 16,
    warmupSeconds: 3,
    loadSeconds: 5,
    rounds: 3,
    revocationTrials: 3,
    seenSamples: 200,
    catalogueSeconds: 5,
    catalogueSizes: [10_000, 100_000],
    catalogueChanges: 3,
    watchdogSeconds: 900,
  },
  quick: {
    webhookSamples: 8,
    loadKeys: 200,
    connections: 16,
    warmupSeconds: 1,
    loadSeconds: 2,
    rounds: 1,
    revocationTrials: 1,
    seenSamples: 40,
    catalogueSeconds: 1.5,
    catalogueSizes: [2_000],
    catalogueChanges: 1,
    watchdogSeconds: 240,
  },
};

const SOAK_DEFAULT_SECONDS = 600;

/** The flags as given, the run's size ("quick" or "full") and the settings they make; exits with 2 on a bad number. */
export function readSettings() {
  const { values: args } = parseArgs({
    options: {
      quick: { type: "boolean", default: false },
      soak: { type: "boolean", default: false },
      webhooks: { type: "boolean", default: false },
      stream: { type: "boolean", default: false },
      catalogue: { type: "boolean", default: false },
      "hot-path": { type: "boolean", default: false },
      profile: { type: "boolean", default: false },
      "secret-scanning": { type: "boolean", default: false },
      search: { type: "boolean", default: false },
      costs: { type: "boolean", default: false },
      exports: { type: "boolean", default: false },
      sizes: { type: "string" },
      "stream-seconds": { type: "string" },
      rounds: { type: "string" },
      "products-max": { type: "boolean", default: false },
      connections: { type: "string" },
      seconds: { type: "string" },
      "keep-state": { type: "boolean", default: false },
    },
  });
  for (const name of ["connections", "seconds", "rounds"] as const) {
    const value = args[name];
    const most = args.soak && name === "seconds" ? 3600 : 600;
    if (value !== undefined && !(Number(value) > 0 && Number(value) <= most && (name === "seconds" || Number.isInteger(Number(value))))) {
      console.error(`--${name} must be a positive ${name === "seconds" ? "number" : "whole number"} (at most ${most}), e.g. --${name} 16.`);
      process.exit(2);
    }
  }
  const size = args.quick ? "quick" : "full";
  const settings = {
    ...SIZES[size],
    ...(args.connections ? { connections: Number(args.connections) } : {}),
    ...(args.seconds ? { loadSeconds: Number(args.seconds) } : {}),
    ...(args.rounds ? { rounds: Number(args.rounds) } : {}),
    ...(args["products-max"] ? { catalogueSizes: [...SIZES[size].catalogueSizes, 1_000_000] } : {}),
    costSizes: costSizes(args.sizes),
    streamSeconds: Number(args["stream-seconds"] ?? 60),
    products: 1000,
    catalogueProducts: 10_000,
    exactKeys: 20,
  };
  return { args, size, settings, soakSeconds: Number(args.seconds ?? SOAK_DEFAULT_SECONDS) } as const;
}

/** `--sizes 10000,100000` (the default, the contract's): the catalogue sizes `--costs` measures at. */
function costSizes(given: string | undefined): number[] {
  const sizes = (given ?? "10000,100000").split(",").map(Number);
  if (!sizes.every((size) => Number.isInteger(size) && size >= 1000 && size <= 1_000_000)) {
    console.error("--sizes takes catalogue sizes from 1,000 to 1,000,000, e.g. --sizes 10000,100000.");
    process.exit(2);
  }
  return sizes;
}

export type Run = ReturnType<typeof readSettings>;
export type Settings = Run["settings"];
