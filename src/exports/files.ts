import { parquetWriteBuffer } from "hyparquet-writer";
import { currencyExponent } from "../platform/money.ts";

/**
 * An export's rows as file bytes: Parquet with typed columns (hyparquet-writer, docs/dependencies.md) or NDJSON.
 *
 * Money is DECIMAL(18, the currency's exponent): JPY 1500 is DECIMAL(18,0), USD 14.99 DECIMAL(18,2), KWD 10.125
 * DECIMAL(18,3), each amount exactly the API's. A Parquet column has one scale for all its rows, so a Parquet file holds
 * one currency (splitByCurrency): the runner writes a file per day and currency. 18 digits hold 2^53 − 1 minor units
 * (MAX_MINOR_UNITS) at any scale, as an INT64. Timestamps are TIMESTAMP (milliseconds, UTC), as the API's are.
 */

type ColumnType = "string" | "money" | "timestamp" | "int" | "double" | "bool";
export interface Column {
  name: string;
  type: ColumnType;
  /** A money column's currency: the row's column of this name. */
  currency?: string;
}
export type Row = Record<string, string | number | boolean | null>;

const MONEY_PRECISION = 18;

/** A file's currency in each of its currency columns (null: the rows have none, and their money is null). */
export type FileCurrencies = Record<string, string | null>;

/** The scale of an amount in `currency`: its minor unit's digits (0 for a currency column that is null: no amounts). */
const scaleOf = (currency: string | null) => (currency === null ? 0 : currencyExponent(currency));

/** A Parquet file's currencies as its manifest entry lists them: each currency column's code and its money's scale. */
export type FileMoney = Record<string, { code: string | null; scale: number }>;
export const moneyOf = (currencies: FileCurrencies | undefined): { currencies?: FileMoney } =>
  currencies
    ? { currencies: Object.fromEntries(Object.entries(currencies).map(([column, code]) => [column, { code, scale: scaleOf(code) }])) }
    : {};

/** "14.99" in USD (or "-1.50": a change) → 1499n, its unscaled DECIMAL(18, 2) value: the amount in minor units. */
function unscaledMoney(amount: string, currency: string): bigint {
  const negative = amount.startsWith("-");
  const [whole = "0", fraction = ""] = (negative ? amount.slice(1) : amount).split(".");
  const digits = BigInt(whole + fraction.padEnd(currencyExponent(currency), "0"));
  return negative ? -digits : digits;
}

/** The columns naming a currency (a catalogue row has two: the offer's and the summary's). */
const currencyColumns = (columns: readonly Column[]) => [...new Set(columns.flatMap((c) => (c.currency ? [c.currency] : [])))];

/**
 * A day's rows as Parquet files' rows: one group per combination of currencies (nearly always one currency), in a
 * stable order, each group's rows in their order. A step's rows are split, never held past the step.
 */
export function splitByCurrency(columns: readonly Column[], rows: readonly Row[]): { currencies: FileCurrencies; rows: Row[] }[] {
  const named = currencyColumns(columns);
  const groups = new Map<string, { currencies: FileCurrencies; rows: Row[] }>();
  for (const row of rows) {
    const currencies = Object.fromEntries(named.map((name) => [name, (row[name] as string | null | undefined) ?? null]));
    const key = JSON.stringify(currencies);
    const group = groups.get(key);
    if (group) group.rows.push(row);
    else groups.set(key, { currencies, rows: [row] });
  }
  return [...groups].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, group]) => group);
}

function schemaElement({ name, type, currency }: Column, currencies: FileCurrencies) {
  const base = { name, repetition_type: "OPTIONAL" as const };
  switch (type) {
    case "string":
      return { ...base, type: "BYTE_ARRAY" as const, converted_type: "UTF8" as const };
    case "money":
      return {
        ...base,
        type: "INT64" as const,
        converted_type: "DECIMAL" as const,
        scale: scaleOf(currencies[currency!] ?? null),
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

function columnValues(column: Column, rows: readonly Row[], currencies: FileCurrencies) {
  return rows.map((row) => {
    const value = row[column.name] ?? null;
    if (value === null) return null;
    switch (column.type) {
      case "money": {
        const currency = String(row[column.currency!]);
        // The column's scale is the file's currency's: an amount in another would read as a different amount.
        if (currency !== currencies[column.currency!])
          throw new Error(`${column.name}: ${currency} in a ${currencies[column.currency!]} file`);
        return unscaledMoney(String(value), currency);
      }
      case "timestamp":
        return new Date(String(value));
      case "int":
        return BigInt(value as number);
      default:
        return value;
    }
  });
}

/**
 * The rows as one Parquet file (one row group), its money at `currencies`' scales (rows of other currencies throw:
 * splitByCurrency makes the groups), or as NDJSON lines (money as the API's decimal strings, any currencies).
 */
export function encodeRows(
  format: "parquet" | "ndjson",
  columns: readonly Column[],
  rows: readonly Row[],
  currencies: FileCurrencies = {},
): Uint8Array {
  if (format === "ndjson") {
    return new TextEncoder().encode(
      rows.map((row) => `${JSON.stringify(Object.fromEntries(columns.map((c) => [c.name, row[c.name] ?? null])))}\n`).join(""),
    );
  }
  const buffer = parquetWriteBuffer({
    columnData: columns.map((column) => ({ name: column.name, data: columnValues(column, rows, currencies) as never })),
    schema: [{ name: "root", num_children: columns.length }, ...columns.map((column) => schemaElement(column, currencies))] as never,
    rowGroupSize: rows.length || 1,
    createdBy: "price-data-api exports",
  });
  return new Uint8Array(buffer);
}

/** `date=YYYY-MM-DD/part-00042.parquet`: Hive-partitioned by day, so query engines read the files in place. */
export const partPath = (date: string, file: number, format: "parquet" | "ndjson") =>
  `date=${date}/part-${String(file).padStart(5, "0")}.${format}`;
