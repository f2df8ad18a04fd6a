import type { McpServer, RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import { ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

/**
 * tools/list with schemas every host can read. zod writes a nullable of a bare type as a type array
 * (`"type": ["string","null"]`), which hosts that take one type per schema refuse and the MCP inspector flags; here
 * each such array becomes an `anyOf` of one-type schemas (`[{"type":"string"},{"type":"null"}]`), the same values.
 * The list is otherwise the SDK's own (name, description, annotations, draft-7 input and output schemas).
 */

type Json = unknown;

/** Values that are data, not schemas: left as they are. */
const DATA_KEYWORDS = new Set(["enum", "const", "default", "examples", "example"]);

/** The schema with every `type` array written as an `anyOf` of single types. */
function portableSchema(schema: Json): Json {
  if (Array.isArray(schema)) return schema.map(portableSchema);
  if (schema === null || typeof schema !== "object") return schema;
  const out: Record<string, Json> = {};
  for (const [key, value] of Object.entries(schema)) out[key] = DATA_KEYWORDS.has(key) ? value : portableSchema(value);
  if (!Array.isArray(out.type)) return out;
  const { type, ...rest } = out;
  return { ...rest, anyOf: (type as string[]).map((one) => ({ type: one })) };
}

const EMPTY_INPUT = { type: "object", properties: {} };

const jsonSchemaOf = (schema: unknown, io: "input" | "output") =>
  portableSchema(z.toJSONSchema(schema as z.ZodType, { target: "draft-7", io })) as Record<string, Json>;

/** Answers tools/list for `tools` (replacing the SDK's answer: the protocol lets a handler be set again). */
export function listToolsPortably(server: McpServer, tools: Readonly<Record<string, RegisteredTool>>) {
  server.server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: Object.entries(tools).map(([name, tool]) => ({
      name,
      description: tool.description,
      annotations: tool.annotations,
      inputSchema: (tool.inputSchema ? jsonSchemaOf(tool.inputSchema, "input") : EMPTY_INPUT) as { type: "object" },
      ...(tool.outputSchema && { outputSchema: jsonSchemaOf(tool.outputSchema, "output") as { type: "object" } }),
    })),
  }));
}
