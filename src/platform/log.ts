type Fields = Record<string, unknown>;
type Level = "info" | "warn" | "error";

/**
 * One log shape everywhere, one JSON object a line: `level`, `source` (the part of the system), `message`
 * (what happened, for a person), then the fields (ids, `request_id` where a request is known, `error`).
 * Workers Logs index the keys, so a query by source or request id finds every line.
 */
export function logger(source: string) {
  const write =
    (level: Level) =>
    (message: string, fields: Fields = {}) =>
      (level === "info" ? console.log : console.error)(JSON.stringify({ level, source, message, ...fields }));
  return { info: write("info"), warn: write("warn"), error: write("error") };
}
