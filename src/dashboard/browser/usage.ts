/** The Usage view: one key's (or the whole account's) admitted and refused requests, as a chart and a table. */
import type { components } from "../../../client/schema.d.ts";
import { api } from "./api.ts";
import type { ApiKey, Granularity, Usage } from "./api-types.ts";
import { attempt, byId, el, onSubmit } from "./dom.ts";
import { environment, hashFor, keyLimits } from "./environment.ts";
import { usageChart } from "./usage-chart.ts";

type Limits = components["schemas"]["Limits"];

/** The Period choices: the last hour is the last 60 of the 24 hours' minutes (one request serves both). */
const RANGES = {
  "last-hour": { granularity: "minute", title: "last hour", buckets: 60 },
  minute: { granularity: "minute", title: "last 24 hours", buckets: undefined },
  hour: { granularity: "hour", title: "last 30 days", buckets: undefined },
  day: { granularity: "day", title: "last year", buckets: undefined },
} as const satisfies Record<string, { granularity: Granularity; title: string; buckets: number | undefined }>;
type Range = keyof typeof RANGES;
const LIMIT_FOR: Record<Granularity, keyof Limits> = { minute: "per_minute", hour: "per_hour", day: "per_day" };

let limits: Limits | undefined;
let keys: ApiKey[] = [];
let shown: { title: string; granularity: Granularity; buckets: Usage["buckets"]; keyChosen: boolean; notes: string[] } | undefined;
/** Until someone picks a Period, the view picks it: the last hour when all of the day's requests are in it. */
let rangeChosen = false;

export function useLimits(planLimits: Limits): void {
  limits = planLimits;
}

/** What limits each key of the environment shown. */
const perKeyLimits = (): Limits | undefined => limits && keyLimits(limits);

/** Keeps the key picker in step with the key list (keys of every status: an expired key's past usage still counts). */
export function offerKeys(list: ApiKey[]): void {
  keys = list;
  const picker = byId<HTMLSelectElement>("usage-key");
  const chosen = picker.value;
  picker.replaceChildren(
    el("option", { value: "" }, environment() === "test" ? "All test keys (account total)" : "All keys (account total)"),
    ...list.map((key) =>
      el("option", { value: key.id }, `${key.name} (${key.prefix}…)${key.status === "active" ? "" : `, ${key.status}`}`),
    ),
  );
  picker.value = list.some((key) => key.id === chosen) ? chosen : "";
  // A list that arrives while the view shows (a key created a moment before the tab was opened) redraws it.
  if (!byId("view-usage").hidden) void attempt(loadUsage, byId("usage-feedback"));
}

function emptyState(): HTMLElement {
  const link = el("a", { href: hashFor("keys"), class: "button primary" }, "Go to Keys");
  return el(
    "div",
    { class: "empty-state" },
    el(
      "p",
      {},
      el("strong", {}, environment() === "test" ? "No test keys, so no test usage yet." : "No keys, so no usage yet."),
      " Create a key and call the API with it; each request shows here within the minute.",
    ),
    link,
  );
}

function draw(): void {
  const area = byId("usage");
  const perKey = perKeyLimits();
  if (!shown || !perKey) return;
  const width = Math.max(280, area.clientWidth || 640);
  const tableOpen = area.querySelector("details")?.open ?? false;
  const { title, granularity, buckets, keyChosen, notes } = shown;
  // The plan's limits are per key: over the account's total (many keys) a per-key line would mislead.
  const limit = keyChosen ? perKey[LIMIT_FOR[granularity]] : undefined;
  area.replaceChildren(usageChart({ title, granularity, buckets, limit, width, tableOpen, notes }));
}

/** Fetches and draws what the controls say. */
export async function loadUsage(): Promise<void> {
  const area = byId("usage");
  const form = byId<HTMLFormElement>("usage-controls");
  form.hidden = !keys.length;
  if (!keys.length) {
    shown = undefined;
    area.replaceChildren(emptyState());
    return;
  }
  const data = new FormData(form);
  const keyId = String(data.get("key") ?? "");
  const picked = String(data.get("range") ?? "minute");
  let range: Range = picked in RANGES ? (picked as Range) : "minute";
  const { granularity } = RANGES[range];
  const key = keys.find((k) => k.id === keyId);
  // The account's total is of the environment shown; a key's usage is its own.
  const path = key ? `/api-keys/${encodeURIComponent(key.id)}/usage?` : `/account/usage?environment=${environment()}&`;
  const { buckets: all } = await api<Usage>("GET", `${path}granularity=${granularity}`);
  const notes: string[] = [];
  if (!rangeChosen && granularity === "minute") {
    const lastHour = all.slice(-RANGES["last-hour"].buckets);
    const busy = (buckets: typeof all) => buckets.some((b) => b.admitted + b.refused > 0);
    const next: Range = busy(lastHour) && !busy(all.slice(0, -lastHour.length)) ? "last-hour" : "minute";
    if (next === "last-hour") notes.push("Showing the last hour only: there were no requests in the 23 hours before it.");
    range = next;
    form.querySelector<HTMLInputElement>(`input[name="range"][value="${range}"]`)!.checked = true;
  }
  const wanted = RANGES[range].buckets;
  const buckets = wanted ? all.slice(-wanted) : all;
  if (!key) notes.push("Limits apply to each key on its own, so none is drawn over the total: choose a key to see its limit.");
  const everyKey = environment() === "test" ? "All test keys" : "All keys";
  shown = { title: `${key ? `“${key.name}”` : everyKey}, ${RANGES[range].title}`, granularity, buckets, keyChosen: !!key, notes };
  draw();
}

export function setUpUsage(): void {
  const form = byId<HTMLFormElement>("usage-controls");
  onSubmit(form, loadUsage, byId("usage-feedback"));
  form.addEventListener("change", (event) => {
    if (event.target instanceof HTMLInputElement && event.target.name === "range") rangeChosen = true;
    void attempt(loadUsage, byId("usage-feedback"));
  });
  let lastWidth = 0;
  window.addEventListener("resize", () => {
    const width = byId("usage").clientWidth;
    if (width && width !== lastWidth) {
      lastWidth = width;
      draw();
    }
  });
}
