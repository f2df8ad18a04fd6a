/**
 * `npm run webhook:listen -- --secret whsec_… [--port 9000] [--status 204]`
 *
 * A webhook receiver for local development: an HTTP server on 127.0.0.1 that checks each request's
 * signature with the `standardwebhooks` library (as a real receiver would) and prints the event.
 * It answers `--status` (204 by default) to verified requests, so 500 or 410 show the worker's
 * retries and disabling; a request whose signature does not verify gets 401 and is printed as such.
 * The secret is the `whsec_…` that POST /webhooks returned (also read from WEBHOOK_SECRET), or the one an MCP client gave
 * events/subscribe: then a verified `verification` POST is answered with its challenge, as the subscription asks, and
 * each event (an MCP EventOccurrence) is printed with its X-MCP-Subscription-Id.
 * Point a webhook at it with WEBHOOK_ALLOW_INSECURE_URLS=true (the .dev.vars default); see docs/webhooks.md.
 */
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { Webhook } from "standardwebhooks";

const { values: args } = parseArgs({
  options: {
    secret: { type: "string", default: process.env.WEBHOOK_SECRET },
    port: { type: "string", default: "9000" },
    status: { type: "string", default: "204" },
  },
});

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

const SECRET_HINT =
  'Pass the webhook\'s secret: npm run webhook:listen -- --secret whsec_… with the "secret" POST /webhooks returned (once).';
if (!args.secret?.startsWith("whsec_")) fail(SECRET_HINT);
const port = Number(args.port);
const status = Number(args.status);
if (!Number.isInteger(port) || port < 1 || port > 65535) fail("--port must be a port number, e.g. --port 9000.");
if (!Number.isInteger(status) || status < 200 || status > 599) fail("--status must be an HTTP status, e.g. --status 500.");

/** The library refuses a secret that is not base64 after `whsec_` (the documented placeholder `whsec_…` is not) with a stack trace. */
const webhook = (() => {
  try {
    return new Webhook(args.secret);
  } catch {
    return fail(`"${args.secret}" is not a webhook secret: after whsec_ comes base64, as POST /webhooks returns it. ${SECRET_HINT}`);
  }
})();
const time = () => new Date().toISOString().slice(11, 19);

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const headers = Object.fromEntries(Object.entries(req.headers).map(([name, value]) => [name, String(value)]));
    try {
      const event = webhook.verify(body, headers) as { type?: string; name?: string; challenge?: string; data: unknown };
      const subscription = headers["x-mcp-subscription-id"];
      if (event.type === "verification") {
        console.log(`${time()} ✓ verification of MCP subscription ${subscription} (signature verified; echoing the challenge)`);
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ challenge: event.challenge }));
        return;
      }
      const what = subscription ? `${event.name}  subscription ${subscription}` : event.type;
      console.log(`${time()} ✓ ${what}  webhook-id ${headers["webhook-id"]}  (signature verified; answering ${status})`);
      console.log(JSON.stringify(event.data, null, 2));
      res.writeHead(status).end();
    } catch (error) {
      console.log(`${time()} ✗ ${req.method} ${req.url}: ${error instanceof Error ? error.message : String(error)} (answering 401)`);
      res.writeHead(401).end();
    }
  });
});

server.listen(port, "127.0.0.1", () => {
  console.log(`Listening on http://127.0.0.1:${port}/ for signed webhook deliveries (Ctrl-C stops).`);
});
server.on("error", (error) => fail(`Cannot listen on 127.0.0.1:${port}: ${error.message}`));
