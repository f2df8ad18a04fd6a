import { availableParallelism, cpus, totalmem } from "node:os";

/** The machine a run measured on, as every results file records it. */
export function machine() {
  const model = cpus()[0]?.model ?? "unknown CPU";
  return { cores: availableParallelism(), model, memoryGb: Math.round(totalmem() / 2 ** 30), node: process.version };
}

/** A moment (now unless told) to the minute, as a report's heading gives it: "2026-11-25 04:23 UTC". */
export const nowUtc = (at = Date.now()) => `${new Date(at).toISOString().slice(0, 16).replace("T", " ")} UTC`;
