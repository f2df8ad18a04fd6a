import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/**
 * The README's route table ("Where each route lives") against the OpenAPI document (client/openapi.json, which
 * test/node/client-types.test.ts holds to the routes): the same operations, each with the credential its security
 * requirement names. The few routes the document does not describe (pages, the document itself, MCP) are listed here.
 */

const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
const document = JSON.parse(readFileSync(new URL("../../client/openapi.json", import.meta.url), "utf8")) as {
  paths: Record<string, Record<string, { security?: Record<string, string[]>[] }>>;
};

/**
 * Served by the app but not operations of the document: the index, the MCP endpoint, the dashboard, the reference, and
 * the OAuth protocol's own endpoints and metadata (their shapes are the RFCs', served by the OAuth library), and an
 * export's download URLs (handed out by GET /exports/{id}, their own authority: docs/exports.md).
 */
const OUTSIDE_THE_DOCUMENT = [
  "GET /",
  "POST /mcp",
  "GET /dashboard",
  "GET /dashboard/callback",
  "GET /docs",
  "GET /openapi.json",
  "GET /.well-known/oauth-protected-resource",
  "GET /.well-known/oauth-authorization-server",
  "GET /oauth/authorize",
  "POST /oauth/register",
  "POST /oauth/token",
  "GET /exports/{id}/download",
];

/** How the README names each security scheme; an admin route also names its scopes. */
const CREDENTIALS: Record<string, string> = {
  ApiKey: "API key",
  AccountLogin: "account login",
  AdminJWT: "admin",
  GitHubSignature: "GitHub's signature",
};

function readmeRoutes(): Map<string, string> {
  const section = readme.slice(readme.indexOf("## Where each route lives"));
  const rows = section.split("\n").filter((line) => line.startsWith("| ") && !line.startsWith("| Method") && !line.startsWith("| ---"));
  const routes = new Map<string, string>();
  for (const row of rows) {
    const [methods, paths, credential] = row
      .split("|")
      .slice(1, 4)
      .map((cell) => cell.trim());
    for (const method of methods!.split(", "))
      for (const [, path] of paths!.matchAll(/`([^`]+)`/g)) routes.set(`${method} ${path}`, credential!);
  }
  return routes;
}

function documentRoutes(): Map<string, string[]> {
  const routes = new Map<string, string[]>();
  for (const [path, operations] of Object.entries(document.paths))
    for (const [method, operation] of Object.entries(operations))
      if (["get", "put", "post", "patch", "delete"].includes(method)) {
        const requirement = operation.security?.[0] ?? {};
        routes.set(
          `${method.toUpperCase()} ${path}`,
          Object.entries(requirement).flatMap(([scheme, scopes]) => [CREDENTIALS[scheme] ?? scheme, ...scopes.map((s) => `\`${s}\``)]),
        );
      }
  return routes;
}

describe("the README's route table", () => {
  it("lists every operation of the OpenAPI document, and the routes outside it, and nothing else", () => {
    const documented = [...documentRoutes().keys(), ...OUTSIDE_THE_DOCUMENT].sort();
    expect([...readmeRoutes().keys()].sort()).toEqual(documented);
  });

  it("names each operation's credential (and an admin route's scopes) as its security requirement does", () => {
    const table = readmeRoutes();
    for (const [route, names] of documentRoutes()) {
      for (const name of names) expect(table.get(route), route).toContain(name);
    }
  });
});
