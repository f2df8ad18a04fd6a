import { type Schema, Validator } from "@cfworker/json-schema";
import { expect } from "vitest";
import { call } from "./http.ts";

/**
 * Checks real responses against the OpenAPI document the worker serves: the status must be one the
 * operation lists, every header the response object marks required must be there and match its
 * schema, the Content-Type must be one of the response's media types, and the body must validate
 * against that media type's JSON Schema (each line of an NDJSON body against the schema of one line;
 * compiled by @cfworker/json-schema, draft 2020-12, formats included). Records what it saw, for coverage.
 */

export type Json = Record<string, any>;

export const METHODS = ["get", "put", "post", "delete", "patch"] as const;

/** An operation's parameters of one kind (path, query), resolved, as one JSON Schema object: a generator's input. */
export const parametersSchema = (params: Json[]): Json => ({
  type: "object",
  properties: Object.fromEntries(params.map((p) => [p.name, p.schema])),
  required: params.filter((p) => p.required).map((p) => p.name),
  additionalProperties: false,
});
/** An operation's request (its path and query parameters, resolved by `resolve`, and its JSON body) as one JSON Schema object. */
export function requestSchema(op: Json, resolve: (schema: Json) => Json): Json {
  const params: Json[] = (op.parameters ?? []).map((p: Json) => resolve(p));
  const body = op.requestBody?.content?.["application/json"]?.schema;
  return {
    type: "object",
    properties: {
      path: parametersSchema(params.filter((p) => p.in === "path")),
      query: parametersSchema(params.filter((p) => p.in === "query")),
      ...(body ? { body } : {}),
    },
    required: ["path", "query", ...(body ? ["body"] : [])],
    additionalProperties: false,
  };
}

/** Newline-delimited JSON: the document's schema for it is that of one line. */
const NDJSON = "application/x-ndjson";

/** The body as UTF-8 text, read from a clone; unlike Response.text(), workerd does not warn about a non-text Content-Type (NDJSON). */
export const bodyText = async (res: Response) => new TextDecoder().decode(await res.clone().arrayBuffer());

export async function fetchDocument(): Promise<Json> {
  const res = await call("GET", "/openapi.json");
  expect(res.status, await res.clone().text()).toBe(200);
  return res.json();
}

const pointerPart = (part: string) => part.replaceAll("~", "~0").replaceAll("/", "~1");

export class DocumentChecker {
  /** `METHOD /path status` of every response checked. */
  readonly seen = new Set<string>();
  private readonly validators = new Map<string, Validator>();

  constructor(readonly doc: Json) {}

  /** Follows a local `$ref` ("#/components/…") to what it names, with the pointer it ends at. */
  resolve(value: Json, pointer: string): { value: Json; pointer: string } {
    while (typeof value.$ref === "string") {
      pointer = value.$ref;
      value = (value.$ref as string)
        .slice(2)
        .split("/")
        .map((part) => part.replaceAll("~1", "/").replaceAll("~0", "~"))
        .reduce((node: Json, part) => node?.[part], this.doc);
      expect(value, `unresolvable ${pointer}`).toBeDefined();
    }
    return { value, pointer };
  }

  /** The document as the root schema, with `$ref` pointing into it: its own references then resolve. */
  private validator(pointer: string): Validator {
    let validator = this.validators.get(pointer);
    if (!validator) {
      validator = new Validator({ ...this.doc, $ref: pointer } as Schema, "2020-12", false);
      this.validators.set(pointer, validator);
    }
    return validator;
  }

  validate(instance: unknown, pointer: string): string[] {
    const result = this.validator(pointer).validate(instance);
    return result.valid ? [] : result.errors.map((e) => `${e.instanceLocation} ${e.keyword}: ${e.error}`);
  }

  operation(method: string, path: string): Json {
    const op = this.doc.paths?.[path]?.[method.toLowerCase()];
    expect(op, `${method} ${path} is not in the document`).toBeDefined();
    return op;
  }

  /** Checks `res` against operation `method path` of the document (or, given `component`, against components.responses[component]). */
  async check(res: Response, method: string, path: string, component?: string): Promise<any> {
    const label = `${method.toUpperCase()} ${path} ${res.status}`;
    const text = await bodyText(res);
    let spec: Json;
    let pointer: string;
    if (component) {
      spec = this.doc.components.responses[component];
      pointer = `#/components/responses/${component}`;
      expect(spec, `components.responses.${component}`).toBeDefined();
    } else {
      const op = this.operation(method, path);
      spec = op.responses[String(res.status)];
      expect(spec, `${label} is not a documented response (${Object.keys(op.responses).join(", ")}); body: ${text}`).toBeDefined();
      pointer = `#/paths/${pointerPart(path)}/${method.toLowerCase()}/responses/${res.status}`;
    }
    ({ value: spec, pointer } = this.resolve(spec, pointer));

    for (const [name, header] of Object.entries<Json>(spec.headers ?? {})) {
      const { value: headerSpec, pointer: headerPointer } = this.resolve(header, `${pointer}/headers/${pointerPart(name)}`);
      const value = res.headers.get(name);
      if (value === null) {
        expect(headerSpec.required, `${label}: required header ${name} is missing`).not.toBe(true);
        continue;
      }
      const instance = headerSpec.schema?.type === "integer" && /^-?\d+$/.test(value) ? Number(value) : value;
      expect(this.validate(instance, `${headerPointer}/schema`), `${label}: header ${name}: ${value}`).toEqual([]);
    }

    const seen = component ? `${component} ${res.status}` : label;
    const mediaTypes = Object.keys(spec.content ?? {});
    if (mediaTypes.length === 0) {
      expect(text, `${label}: the document lists no body`).toBe("");
      this.seen.add(seen);
      return undefined;
    }
    const type = (res.headers.get("Content-Type") ?? "").split(";")[0]!.trim();
    expect(mediaTypes, `${label}: Content-Type ${type} is not one the document lists`).toContain(type);
    const schema = `${pointer}/content/${pointerPart(type)}/schema`;
    let body: unknown;
    if (type === NDJSON) {
      // The schema is that of one line; every line ends with "\n", the last one too.
      expect(text === "" || text.endsWith("\n"), `${label}: NDJSON must end with a newline`).toBe(true);
      body = text
        .split("\n")
        .slice(0, -1)
        .map((line, i) => {
          const value = JSON.parse(line);
          expect(this.validate(value, schema), `${label} line ${i + 1}: ${line.slice(0, 500)}`).toEqual([]);
          return value;
        });
    } else {
      body = JSON.parse(text);
      expect(this.validate(body, schema), `${label}: ${text.slice(0, 500)}`).toEqual([]);
    }
    this.seen.add(seen);
    if (mediaTypes.length > 1) this.seen.add(`${seen} ${type}`);
    return body;
  }

  /** Every `METHOD /path status` the document lists, and `METHOD /path status media-type` where a response has several. */
  documented(): string[] {
    return Object.entries<Json>(this.doc.paths).flatMap(([path, item]) =>
      METHODS.filter((method) => item[method]).flatMap((method) =>
        Object.entries<Json>(item[method].responses).flatMap(([status, response]) => {
          const entry = `${method.toUpperCase()} ${path} ${status}`;
          const mediaTypes = Object.keys(this.resolve(response, "").value.content ?? {});
          return [entry, ...(mediaTypes.length > 1 ? mediaTypes.map((type) => `${entry} ${type}`) : [])];
        }),
      ),
    );
  }
}
