/**
 * Live or test: which environment's keys, webhooks, usage and activity the page shows. The choice is the Test mode
 * switch's, kept in the URL's hash (`#test/webhooks`; a bare `#webhooks` is live) and remembered per browser in
 * localStorage for a visit without a hash. In test mode the page is marked (a banner, another colour: styles.css).
 */
import type { components } from "../../../client/schema.d.ts";
import { PLAN_LIMITS } from "../../rate-limit/plans.ts";
import type { Limits } from "../../rate-limit/types.ts";
import { byId } from "./dom.ts";

export type Environment = components["schemas"]["Environment"];

/** How a test key begins (src/api-keys/format.ts); a live key begins pda_live_. */
export const TEST_KEY_PREFIX = "pda_test_";

const STORED = "price-data-dashboard:environment";
const TEST_PREFIX = "test/";

let current: Environment = localStorage.getItem(STORED) === "test" ? "test" : "live";
const listeners: Array<() => void> = [];

export const environment = (): Environment => current;

/** The records (keys, webhooks) of the environment shown. */
export const ofShownEnvironment = <T extends { environment: Environment }>(records: T[]): T[] =>
  records.filter((record) => record.environment === current);

/** Told after the environment changes (each view redraws from what it holds or reads again). */
export function onEnvironmentChanged(listener: () => void): void {
  listeners.push(listener);
}

/** Each key's limits in the environment shown: the plan's, or the standard plan's for every test key. */
export const keyLimits = (planLimits: Limits): Limits => (current === "test" ? PLAN_LIMITS.standard : planLimits);

/** The hash naming `view` in `env` ("#test/webhooks", "#webhooks"). */
export const hashFor = (view: string, env: Environment = current): string => `#${env === "test" ? TEST_PREFIX : ""}${view}`;

/** The environment and view a hash names ("#test/webhooks" → test, webhooks); no view for a hash that names none. */
export function readHash(hash: string): { env: Environment; view: string } {
  const fragment = hash.replace(/^#/, "");
  return fragment.startsWith(TEST_PREFIX) ? { env: "test", view: fragment.slice(TEST_PREFIX.length) } : { env: "live", view: fragment };
}

/** Switches to `env`: remembered, marked on the page, and every view told; whether it changed. */
export function useEnvironment(env: Environment): boolean {
  const changed = env !== current;
  current = env;
  localStorage.setItem(STORED, env);
  document.documentElement.dataset.environment = env; // the root: its background is the page's
  byId("test-banner").hidden = env !== "test";
  byId("environment-switch").setAttribute("aria-checked", String(env === "test"));
  if (changed) for (const listener of listeners) listener();
  return changed;
}
