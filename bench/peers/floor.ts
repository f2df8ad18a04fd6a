/**
 * The design's physical floor, for `npm run bench`: the bare worker plus one call per request to a
 * SQLite-backed Durable Object of the request's API key (idFromName of the bearer key, as ours has
 * one object per key), with no key check and no limiting. `floor-rpc` calls a method that does
 * nothing; `floor-write` calls one that writes one row, so each answer waits for one storage commit.
 */
import { DurableObject } from "cloudflare:workers";
import { type PeerEnv, peerApp } from "./shared.ts";

export class FloorObject extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS calls (at INTEGER NOT NULL)");
  }

  noop(): void {}

  write(): void {
    this.ctx.storage.sql.exec("INSERT INTO calls (at) VALUES (?)", Date.now());
  }
}

type FloorEnv = PeerEnv<{ FLOOR: DurableObjectNamespace<FloorObject> }>;

export function floorWorker(call: "noop" | "write") {
  const app = peerApp<FloorEnv>(async (c, next) => {
    const key = /^Bearer[ \t]+(\S+)$/i.exec(c.req.header("Authorization") ?? "")?.[1] ?? "anonymous";
    const stub = c.env.FLOOR.get(c.env.FLOOR.idFromName(key));
    await (call === "noop" ? stub.noop() : stub.write());
    // The data routes ask for an API key credential; the floor hands them one without checking anything.
    c.set("credential", {
      kind: "api-key",
      keyHash: "",
      environment: "live",
      key: { id: "floor", accountId: "floor", environment: "live", keyHash: "", request: { ip: "", scope: undefined } },
    });
    await next();
  });
  return { fetch: app.fetch } satisfies ExportedHandler<Env>;
}
