import { openApiAppOf } from "../http/openapi.ts";
import { validationHook } from "../http/validation.ts";
import { exportServices } from "./routes/common.ts";
import { registerCreateExport } from "./routes/create-export.ts";
import { registerGetExport } from "./routes/get-export.ts";
import { registerListExports } from "./routes/list-exports.ts";
import { downloadQuery } from "./schema.ts";
import { downloadFile } from "./service.ts";

/**
 * /exports (account login). Export ids of another account are 404, as if they did not exist. The download URLs
 * (`GET /exports/{id}/download?path&expires&signature`) carry their own authority, an HMAC of the service, as a
 * presigned URL does: they are handed out by GET /exports/{id}, not an operation of the document. Each operation is
 * declared beside its handler in its own file under routes/; they are registered here in the document's order.
 */
export const exportRoutes = openApiAppOf(registerCreateExport, registerListExports, registerGetExport).get("/:id/download", async (c) => {
  const parsed = downloadQuery.safeParse(c.req.query());
  validationHook({ target: "query", success: parsed.success, error: parsed.error });
  const query = parsed.data!;
  const object = await downloadFile(exportServices(c), {
    id: c.req.param("id"),
    path: query.path,
    expires: Number(query.expires),
    signature: query.signature,
  });
  return new Response(object.body, {
    headers: {
      "Content-Type": object.httpMetadata?.contentType ?? "application/octet-stream",
      "Content-Length": String(object.size),
      "Cache-Control": "private, no-store",
    },
  });
});
