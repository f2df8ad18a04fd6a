/**
 * What every mode of the bench shares, made once per run: the state folder, the progress lines, the
 * local IdP (started on first use) with the real worker's variables and the tokens it signs, the
 * results folder, and the clean-up that stops whatever was started.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mintToken } from "../../scripts/mint-token.ts";
import { ROOT, stopAll } from "./processes.ts";
import { type Jwks, startJwks } from "./setup.ts";

const AUDIENCE = "price-data-api";
const RESULTS = "bench/results";

export interface Bench {
  /** A fresh folder for this run's D1 state, bundles, load jobs and logs; removed at the end unless --keep-state. */
  state: string;
  /** A progress line on stderr, with the seconds since the run started. */
  step(message: string): void;
  seconds(): number;
  /** The local IdP whose keys the real worker trusts, started on first use. */
  idp(): Promise<Jwks>;
  /** What the real worker (and the peers, which mount its request context) needs to start, plus `extra`. */
  workerVars(extra?: Record<string, string>): Promise<Record<string, string>>;
  /** A login token of the local IdP for account `sub`, minted once per subject and scope. */
  token(sub: string, scope?: string): Promise<string>;
  /** Closed with the run (a stand-in server a mode starts). */
  closeAtEnd(server: { close(): void }): void;
  /** Writes each file into bench/results and says so. */
  writeResults(files: Record<string, string>): void;
  /** Stops every worker and server and removes the state; once, whoever asks first. */
  cleanUp(): Promise<void>;
}

export function openBench(name: string, options: { keepState: boolean }): Bench {
  const startedAt = Date.now();
  const seconds = () => (Date.now() - startedAt) / 1000;
  const state = mkdtempSync(join(tmpdir(), `price-data-${name}-`));
  const servers: { close(): void }[] = [];
  let idp: Promise<Jwks> | undefined;
  const started = () =>
    (idp ??= startJwks().then((jwks) => {
      servers.push(jwks.server);
      return jwks;
    }));
  // One secret key for the run: harmless where unused, required by the configuration once webhooks are in.
  const webhookSecretKey = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64");
  const tokens = new Map<string, Promise<string>>();
  let cleaning: Promise<void> | undefined;
  const step = (message: string) => console.error(`[bench ${seconds().toFixed(1)} s] ${message}`);
  return {
    state,
    seconds,
    step,
    idp: started,
    async workerVars(extra = {}) {
      const { issuer, jwksUrl } = await started();
      return { IDP_ISSUER: issuer, IDP_AUDIENCE: AUDIENCE, IDP_JWKS_URL: jwksUrl, WEBHOOK_SECRET_KEY: webhookSecretKey, ...extra };
    },
    token(sub, scope) {
      const id = `${sub} ${scope ?? ""}`;
      let token = tokens.get(id);
      if (!token) {
        token = started().then(({ privateJwk, issuer }) =>
          mintToken(privateJwk, { issuer, audience: AUDIENCE, sub, ...(scope ? { scope } : {}) }),
        );
        tokens.set(id, token);
      }
      return token;
    },
    closeAtEnd: (server) => servers.push(server),
    writeResults(files) {
      mkdirSync(join(ROOT, RESULTS), { recursive: true });
      for (const [file, text] of Object.entries(files)) writeFileSync(join(ROOT, RESULTS, file), text);
      const names = Object.keys(files);
      step(`written to ${RESULTS}/${names.length > 1 ? `${names.slice(0, -1).join(", ")} and ${names.at(-1)}` : names[0]}`);
    },
    cleanUp() {
      cleaning ??= (async () => {
        await stopAll();
        for (const server of servers) server.close();
        if (!options.keepState) rmSync(state, { recursive: true, force: true });
        else console.error(`State kept in ${state}`);
      })();
      return cleaning;
    },
  };
}
