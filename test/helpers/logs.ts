import { onTestFinished, vi } from "vitest";

/** One line the code under test logged (src/platform/log.ts: one JSON object a line). */
export interface LogLine {
  level?: string;
  source?: string;
  event?: string;
  message?: string;
  [field: string]: unknown;
}

/**
 * For a test that makes the code fail on purpose (an injected fault, an outage, a route that throws): the warn and
 * error lines it then logs are kept here instead of printed, so a passing run prints no failure it caused itself,
 * and the test checks them instead. Every other test's error logs still print. Restored when the test ends.
 */
export function captureLogs(): LogLine[] {
  const lines: LogLine[] = [];
  const keep = (text: unknown) => {
    try {
      lines.push(JSON.parse(String(text)) as LogLine);
    } catch {
      lines.push({ message: String(text) });
    }
  };
  const spies = [vi.spyOn(console, "error").mockImplementation(keep), vi.spyOn(console, "warn").mockImplementation(keep)];
  onTestFinished(() => {
    for (const spy of spies) spy.mockRestore();
  });
  return lines;
}
