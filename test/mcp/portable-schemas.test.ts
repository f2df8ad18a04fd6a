import { describe, expect, it } from "vitest";
import { freshAccount } from "../helpers/accounts.ts";
import { mcpClient } from "../helpers/mcp.ts";

/**
 * Every tool's inputSchema and outputSchema as hosts that take one type per schema read them (the MCP inspector's
 * schema-portability check): no `type` written as an array anywhere, and every nullable value an `anyOf` with
 * `{"type":"null"}` beside the value's own schema. Also the server's `instructions`.
 */

type Schema = Record<string, unknown>;

/** Every subschema of `schema` with its JSON path. */
function* walk(schema: unknown, path: string): Generator<[string, Schema]> {
  if (Array.isArray(schema)) {
    for (const [i, item] of schema.entries()) yield* walk(item, `${path}[${i}]`);
    return;
  }
  if (schema === null || typeof schema !== "object") return;
  yield [path, schema as Schema];
  for (const [key, value] of Object.entries(schema)) {
    // `properties` and `$defs` name their subschemas; anything else holding objects holds schemas (items, anyOf, …).
    if (key === "enum" || key === "const" || key === "default" || key === "examples" || key === "example") continue;
    yield* walk(value, `${path}.${key}`);
  }
}

/** What the inspector would flag: a `type` array, or a `null` allowed in any other way than anyOf's own `{"type":"null"}`. */
function portabilityProblems(schema: unknown, at: string): string[] {
  const problems: string[] = [];
  for (const [path, node] of walk(schema, at)) {
    if (Array.isArray(node.type)) problems.push(`${path}: type is an array ${JSON.stringify(node.type)}`);
    if (node.nullable !== undefined) problems.push(`${path}: uses nullable (OpenAPI 3.0), not anyOf with null`);
    for (const key of ["oneOf", "anyOf"] as const) {
      const branches = node[key];
      if (!Array.isArray(branches)) continue;
      const nulls = branches.filter((branch: Schema) => branch.type === "null");
      if (nulls.some((branch: Schema) => Object.keys(branch).length !== 1))
        problems.push(`${path}.${key}: its null branch must be exactly {"type":"null"}`);
      if (key === "oneOf" && nulls.length > 0) problems.push(`${path}: a nullable value as oneOf, not anyOf`);
    }
    if (Array.isArray(node.enum) && node.enum.includes(null)) problems.push(`${path}: null inside an enum, not an anyOf branch`);
  }
  return problems;
}

describe("MCP tools' schemas, portable", () => {
  it("the walk finds what it must refuse (it can fail)", () => {
    expect(portabilityProblems({ type: "object", properties: { a: { type: ["string", "null"] } } }, "x")).toEqual([
      'x.properties.a: type is an array ["string","null"]',
    ]);
    expect(portabilityProblems({ anyOf: [{ type: "string" }, { type: "null" }] }, "x")).toEqual([]);
  });

  it("has no type array and writes every nullable as anyOf with null, in every tool's input and output", async () => {
    const client = await mcpClient((await freshAccount({ plan: "premium" })).key);
    const { tools } = await client.listTools();
    expect(tools.length).toBeGreaterThanOrEqual(5);
    const problems = tools.flatMap((tool) => [
      ...portabilityProblems(tool.inputSchema, `${tool.name}.inputSchema`),
      ...portabilityProblems(tool.outputSchema, `${tool.name}.outputSchema`),
    ]);
    expect(problems).toEqual([]);
    // The nullables are still there, as anyOf: get_product's brand is a string or null.
    const brand = (tools.find((tool) => tool.name === "get_product")!.outputSchema!.properties as Record<string, Schema>).brand;
    expect(brand).toEqual(expect.objectContaining({ anyOf: expect.arrayContaining([{ type: "null" }]) }));
    await client.close();
  });

  it("gives instructions: what the tools are for, ids and SKUs, currencies, word-based search", async () => {
    const client = await mcpClient((await freshAccount({ plan: "premium" })).key);
    const instructions = client.getInstructions() ?? "";
    for (const words of ["search_products", "get_product", "sku", "currency", "GET /fx-rates", "word"])
      expect(instructions.toLowerCase(), words).toContain(words.toLowerCase());
    await client.close();
  });
});
