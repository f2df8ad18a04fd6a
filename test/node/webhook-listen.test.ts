import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/** `npm run webhook:listen` refuses a secret it cannot use with its own hint and exit code 2, never a stack trace. */

const script = fileURLToPath(new URL("../../scripts/webhook-listen.ts", import.meta.url));
const listen = (...args: string[]) =>
  spawnSync(process.execPath, [script, ...args], { encoding: "utf8", env: { ...process.env, WEBHOOK_SECRET: "" }, timeout: 20_000 });

describe("npm run webhook:listen", () => {
  it.each([
    ["the documented placeholder", ["--secret", "whsec_…"], /"whsec_…" is not a webhook secret: after whsec_ comes base64/],
    ["not base64", ["--secret", "whsec_not base64!"], /is not a webhook secret/],
    ["no secret", [], /Pass the webhook's secret/],
    ["another kind of secret", ["--secret", "pda_live_abc"], /Pass the webhook's secret/],
  ])("%s: a hint on stderr, exit 2", (_, args, hint) => {
    const run = listen(...args);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(hint);
    expect(run.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(run.stdout).toBe("");
  });
});
