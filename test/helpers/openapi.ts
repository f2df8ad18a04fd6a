import { Validator, type Schema } from "@cfworker/json-schema";
import { expect } from "vitest";
import { call } from "./http.ts";

/**
 * Checks real responses against the OpenAPI document the worker serves: the status must be one the
 * operation lists, every header the response object marks required must be there and match its
 * schema, and the body must validate against the response's JSON Schema (compiled by
 * @cfworker/json-schema, draft 2020-12, formats included). Records what it saw, for coverage.
 */

export type Json = Record<string, any>;

export const METHODS = ["get", "put", "post", "delete", "patch"] as const;

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
    const text = await res.clone().text();
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

    const media = spec.content?.["application/json"];
    if (!media) {
      expect(text, `${label}: the document lists no body`).toBe("");
      this.seen.add(component ? `${component} ${res.status}` : label);
      return undefined;
    }
    expect(res.headers.get("Content-Type"), label).toMatch(/^application\/json/);
    const body = JSON.parse(text);
    expect(this.validate(body, `${pointer}/content/application~1json/schema`), `${label}: ${text.slice(0, 500)}`).toEqual([]);
    this.seen.add(component ? `${component} ${res.status}` : label);
    return body;
  }

  /** Every `METHOD /path status` the document lists. */
  documented(): string[] {
    return Object.entries<Json>(this.doc.paths).flatMap(([path, item]) =>
      METHODS.filter((method) => item[method]).flatMap((method) => Object.keys(item[method].responses).map((status) => `${method.toUpperCase()} ${path} ${status}`)),
    );
  }
}
