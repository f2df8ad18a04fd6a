import { parquetWriteBuffer } from "hyparquet-writer";
import { currencyExponent } from "../platform/money.ts";

/**
 * An export's rows as file bytes: Parquet with typed columns (hyparquet-writer, docs/dependencies.md) or NDJSON.
 *
 * Money is DECIMAL(20, 4): a Parquet column has one scale for all its rows, and one file holds many currencies, so the
 * scale is 4, the largest minor unit of any supported currency (CLF, UYW): every amount of every currency is exact, and
 * 20 digits hold 2^53 − 1 minor units of a currency without a minor unit. The row's `currency` column says which
 * currency (and its own scale) an amount is in. Timestamps are TIMESTAMP (milliseconds, UTC), as the API's are.
 */

type ColumnType = "string" | "money" | "timestamp" | "int" | "double" | "bool";
export interface Column {
  name: string;
  type: ColumnType;
  /** A money column's currency: the row's column of this name. */
  currency?: string;
}
export type Row = Record<string, string | number | boolean | null>;

const MONEY_SCALE = 4;
const MONEY_PRECISION = 20;
/** Bytes of a two's-complement unscaled value of MONEY_PRECISION digits. */
const MONEY_BYTES = 9;

/** "14.99" in USD (or "-1.50": a change) → 149900n, its unscaled DECIMAL(20, 4) value. */
function unscaledMoney(amount: string, currency: string): bigint {
  const negative = amount.startsWith("-");
  const [whole = "0", fraction = ""] = (negative ? amount.slice(1) : amount).split(".");
  const digits = BigInt(whole + fraction.padEnd(currencyExponent(currency), "0"));
  const unscaled = digits * 10n ** BigInt(MONEY_SCALE - currencyExponent(currency));
  return negative ? -unscaled : unscaled;
}

function schemaElement({ name, type }: Column) {
  const base = { name, repetition_type: "OPTIONAL" as const };
  switch (type) {
    case "string":
      return { ...base, type: "BYTE_ARRAY" as const, converted_type: "UTF8" as const };
    case "money":
      return {
        ...base,
        type: "FIXED_LEN_BYTE_ARRAY" as const,
        type_length: MONEY_BYTES,
        converted_type: "DECIMAL" as const,
        scale: MONEY_SCALE,
        precision: MONEY_PRECISION,
      };
    case "timestamp":
      return { ...base, type: "INT64" as const, converted_type: "TIMESTAMP_MILLIS" as const };
    case "int":
      return { ...base, type: "INT64" as const };
    case "double":
      return { ...base, type: "DOUBLE" as const };
    case "bool":
      return { ...base, type: "BOOLEAN" as const };
  }
}

function columnValues(column: Column, rows: readonly Row[]) {
  return rows.map((row) => {
    const value = row[column.name] ?? null;
    if (value === null) return null;
    switch (column.type) {
      case "money":
        return unscaledMoney(String(value), String(row[column.currency!]));
      case "timestamp":
        return new Date(String(value));
      case "int":
        return BigInt(value as number);
      default:
        return value;
    }
  });
}

/** The rows as one Parquet file (one row group) or as NDJSON lines. */
export function encodeRows(format: "parquet" | "ndjson", columns: readonly Column[], rows: readonly Row[]): Uint8Array {
  if (format === "ndjson") {
    return new TextEncoder().encode(
      rows.map((row) => `${JSON.stringify(Object.fromEntries(columns.map((c) => [c.name, row[c.name] ?? null])))}\n`).join(""),
    );
  }
  const buffer = parquetWriteBuffer({
    columnData: columns.map((column) => ({ name: column.name, data: columnValues(column, rows) as never })),
    schema: [{ name: "root", num_children: columns.length }, ...columns.map(schemaElement)] as never,
    rowGroupSize: rows.length || 1,
    createdBy: "price-data-api exports",
  });
  return new Uint8Array(buffer);
}

/** `date=YYYY-MM-DD/part-00042.parquet`: Hive-partitioned by day, so query engines read the files in place. */
export const partPath = (date: string, file: number, format: "parquet" | "ndjson") =>
  `date=${date}/part-${String(file).padStart(5, "0")}.${format}`;
