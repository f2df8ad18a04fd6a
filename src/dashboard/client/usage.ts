/** The Usage view: one key's (or the whole account's) admitted and refused requests, as a chart and a table. */
import type { components } from "../../../client/schema.d.ts";
import { api } from "./api.ts";
import type { ApiKey, Granularity, Usage } from "./api-types.ts";
import { attempt, byId, el, onSubmit } from "./dom.ts";
import { usageChart } from "./usage-chart.ts";

type Limits = components["schemas"]["Limits"];

const RANGE_TITLES: Record<Granularity, string> = { minute: "last 24 hours", hour: "last 30 days", day: "last year" };
const LIMIT_FOR: Record<Granularity, keyof Limits> = { minute: "per_minute", hour: "per_hour", day: "per_day" };

let limits: Limits | undefined;
let keys: ApiKey[] = [];
let shown: { title: string; granularity: Granularity; usage: Usage } | undefined;

export function useLimits(planLimits: Limits): void {
  limits = planLimits;
}

/** Keeps the key picker in step with the key list (keys of every status: an expired key's past usage still counts). */
export function offerKeys(list: ApiKey[]): void {
  keys = list;
  const picker = byId<HTMLSelectElement>("usage-key");
  const chosen = picker.value;
  picker.replaceChildren(
    el("option", { value: "" }, "All keys (account total)"),
    ...list.map((key) =>
      el("option", { value: key.id }, `${key.name} (${key.prefix}…)${key.status === "active" ? "" : `, ${key.status}`}`),
    ),
  );
  picker.value = list.some((key) => key.id === chosen) ? chosen : "";
}

function emptyState(): HTMLElement {
  const link = el("a", { href: "#keys", class: "button primary" }, "Go to Keys");
  return el(
    "div",
    { class: "empty-state" },
    el(
      "p",
      {},
      el("strong", {}, "No keys, so no usage yet."),
      " Create a key and call the API with it; each request shows here within the minute.",
    ),
    link,
  );
}

function draw(): void {
  const area = byId("usage");
  if (!shown || !limits) return;
  const width = Math.max(280, area.clientWidth || 640);
  const tableOpen = area.querySelector("details")?.open ?? false;
  const { title, granularity, usage } = shown;
  area.replaceChildren(usageChart({ title, granularity, buckets: usage.buckets, limit: limits[LIMIT_FOR[granularity]], width, tableOpen }));
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
  const granularity = String(data.get("range") ?? "minute") as Granularity;
  const key = keys.find((k) => k.id === keyId);
  const path = key ? `/api-keys/${encodeURIComponent(key.id)}/usage` : "/account/usage";
  const usage = await api<Usage>("GET", `${path}?granularity=${granularity}`);
  shown = { title: `${key ? `“${key.name}”` : "All keys"}, ${RANGE_TITLES[granularity]}`, granularity, usage };
  draw();
}

export function setUpUsage(): void {
  const form = byId<HTMLFormElement>("usage-controls");
  onSubmit(form, loadUsage, byId("usage-feedback"));
  form.addEventListener("change", () => void attempt(loadUsage, byId("usage-feedback")));
  let lastWidth = 0;
  window.addEventListener("resize", () => {
    const width = byId("usage").clientWidth;
    if (width && width !== lastWidth) {
      lastWidth = width;
      draw();
    }
  });
}
