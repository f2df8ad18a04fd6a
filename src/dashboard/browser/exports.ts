/**
 * The Exports view: the account's exports of the environment shown (docs/exports.md), a dialog that starts one, the
 * progress of those running (GET /exports/{id} every few seconds until they end) and their files' signed download
 * links (valid an hour, so read when asked for, never kept).
 */
import { api } from "./api.ts";
import type { Export, ExportDetail, ExportRequest } from "./api-types.ts";
import { openDialog } from "./dialogs.ts";
import { actionButton, attempt, byId, el, facts, feedbackSlot, onSubmit, say, slotIn, when } from "./dom.ts";
import { environment, ofShownEnvironment, onEnvironmentChanged } from "./environment.ts";

const POLL_MS = 3_000;
const KIND_NAMES: Record<Export["kind"], string> = { catalogue: "Catalogue", changes: "Changes" };
const FORMAT_NAMES: Record<Export["format"], string> = { parquet: "Parquet", ndjson: "NDJSON" };
const STATUS_NAMES: Record<Export["status"], string> = {
  running: "Running",
  succeeded: "Done",
  failed: "Failed",
  scheduled: "Scheduled",
};
const KIND_HINTS: Record<Export["kind"], string> = {
  catalogue: "One row per offer of the published catalogue, with its product's fields, as GET /products serves them.",
  changes: "One row per price or stock change in the span, with the product's brand and category; past 30 days from the archive.",
};

/** The account's exports, of both environments, as last read (the list, then each running one's progress). */
let listed: Export[] = [];
/** Download links read for an export (its files, by id), drawn in its card until the list is read again. */
const shownFiles = new Map<string, ExportDetail>();

const exportPath = (id: string) => `/exports/${encodeURIComponent(id)}`;
const count = (n: number) => n.toLocaleString();

/** "12.3 MB": a file size in the largest unit that keeps it at least 1. */
function formatBytes(bytes: number): string {
  const units = ["bytes", "KB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return unit === 0 ? `${count(bytes)} bytes` : `${value.toLocaleString(undefined, { maximumFractionDigits: 1 })} ${units[unit]}`;
}

const exportName = (job: Export) => `${KIND_NAMES[job.kind]} · ${FORMAT_NAMES[job.format]}`;

function render(): void {
  const jobs = ofShownEnvironment(listed);
  byId("exports").replaceChildren(...(jobs.length ? jobs.map(exportCard) : [emptyState()]));
}

/** Reads the list, draws it, and follows the running exports' progress. */
export async function loadExports(): Promise<void> {
  listed = (await api<{ exports: Export[] }>("GET", "/exports")).exports;
  shownFiles.clear();
  render();
  pollRunning();
}

function emptyState(): HTMLLIElement {
  const test = environment() === "test";
  const button = el("button", { type: "button", class: "primary" }, `Start your first ${test ? "test " : ""}export`);
  button.addEventListener("click", () => void openNewExport());
  const text = test
    ? " A test export writes your sandbox's 1,000 products, or its changes of the last 7 days, exactly as a test key reads them."
    : " Export the whole catalogue, or its price and stock changes over any span, as files a warehouse or DuckDB reads in place.";
  return el("li", { class: "empty-state" }, el("p", {}, el("strong", {}, test ? "No test exports yet." : "No exports yet."), text), button);
}

function span(job: Export): string | Node {
  if (!job.since) return "—";
  return el("span", {}, when(job.since), " to ", job.until ? when(job.until) : "now");
}

function exportCard(job: Export): HTMLLIElement {
  const details: Array<[string, Node | string]> = [
    ["Rows", count(job.rows)],
    ["Files", count(job.files)],
    ["Size", formatBytes(job.bytes)],
    ["Created", when(job.created_at, "—")],
    ["Schedule", job.schedule === "hourly" ? "Hourly" : job.schedule === "daily" ? "Daily" : "Once"],
  ];
  if (job.kind === "changes") details.push([job.schedule ? "Written so far" : "Changes", span(job)]);
  details.push(["Destination", job.destination ? `s3://${job.destination.bucket}/${job.prefix}` : "Our bucket (download links)"]);
  const target = `export ${exportName(job)} of ${new Date(job.created_at).toLocaleString()}`;
  const slot = feedbackSlot();
  const files = shownFiles.get(job.id);
  const running = job.status === "running";
  const canDownload = !job.destination && job.files > 0;
  return el(
    "li",
    { class: `card export ${job.status}`, "data-id": job.id },
    el(
      "div",
      { class: "card-head" },
      el("h3", { tabindex: "-1" }, exportName(job)),
      el("span", { class: `badge ${job.status}` }, STATUS_NAMES[job.status]),
    ),
    running
      ? el(
          "p",
          { class: "progress-line" },
          el("progress", { "aria-label": `Progress of the ${target}` }),
          ` Writing… ${count(job.rows)} rows in ${count(job.files)} files so far.`,
        )
      : null,
    // While running, an error is a step's, which is being tried again (docs/exports.md).
    job.error
      ? el(
          "p",
          { class: "reason" },
          el("strong", {}, running ? "Trying again after an error: " : "Failed because: "),
          job.error.replace(/^(retrying: )?(Error: )?/, ""),
        )
      : null,
    facts(details),
    files ? fileList(files) : null,
    canDownload && !files
      ? el(
          "div",
          { class: "actions" },
          actionButton("Download links", target, (button) => void attempt(() => showFiles(job.id), slot, button)),
        )
      : null,
    slot,
  );
}

/** The export's files with their signed links, and the manifest's. */
function fileList(detail: ExportDetail): HTMLElement {
  const link = (href: string, text: string) => el("a", { href, download: "", rel: "noreferrer" }, text);
  const items = detail.file_list.map((file) =>
    el(
      "li",
      {},
      file.download_url ? link(file.download_url, file.path) : el("code", {}, file.path),
      el("span", { class: "hint" }, ` ${count(file.rows)} rows, ${formatBytes(file.bytes)}`),
    ),
  );
  if (detail.manifest_url)
    items.push(el("li", {}, link(detail.manifest_url, "_manifest.json"), el("span", { class: "hint" }, " the file list")));
  return el(
    "div",
    { class: "files" },
    el("p", { class: "hint" }, "Download links work for an hour (no sign-in needed: hand them to a loader)."),
    el("ul", { class: "file-list" }, ...items),
  );
}

async function showFiles(id: string): Promise<void> {
  const detail = await api<ExportDetail>("GET", exportPath(id));
  shownFiles.set(id, detail);
  replaceListed(detail);
  render();
  byId("exports")
    .querySelector<HTMLElement>(`[data-id="${CSS.escape(id)}"] .file-list a`)
    ?.focus();
}

function replaceListed(job: Export): void {
  listed = listed.map((known) => (known.id === job.id ? job : known));
}

let pollTimer: ReturnType<typeof setTimeout> | undefined;

/**
 * Every few seconds while an export of the environment shown is running and the view shows: reads each running one,
 * redraws, and says when one ends (its links drawn at once). Stops when none runs.
 */
function pollRunning(): void {
  clearTimeout(pollTimer);
  if (!ofShownEnvironment(listed).some((job) => job.status === "running")) return;
  pollTimer = setTimeout(() => void pollOnce(), POLL_MS);
}

async function pollOnce(): Promise<void> {
  if (byId("view-exports").hidden) return; // shown again: loadExports starts over
  const running = ofShownEnvironment(listed).filter((job) => job.status === "running");
  try {
    const read = await Promise.all(running.map((job) => api<ExportDetail>("GET", exportPath(job.id))));
    const ended = read.filter((detail) => detail.status !== "running");
    const moved = read.some((detail) => {
      const before = listed.find((job) => job.id === detail.id);
      return !before || before.updated_at !== detail.updated_at || before.error !== detail.error || before.status !== detail.status;
    });
    for (const detail of read) {
      replaceListed(detail);
      if (detail.status !== "running" && !detail.destination) shownFiles.set(detail.id, detail);
    }
    // Redraw only when something moved, so a card's button keeps its focus meanwhile.
    if (moved) render();
    if (ended.length)
      byId("announcer").textContent = ended
        .map((detail) => `${exportName(detail)} export ${STATUS_NAMES[detail.status].toLowerCase()}: ${count(detail.rows)} rows.`)
        .join(" ");
  } catch (error) {
    say(byId("exports-feedback"), `Progress could not be read: ${error instanceof Error ? error.message : String(error)}`, "error");
    return;
  }
  pollRunning();
}

/** A datetime-local value (local time, minutes) for an instant. */
const localInput = (ms: number) => new Date(ms - new Date(ms).getTimezoneOffset() * 60_000).toISOString().slice(0, 16);

function showKind(form: HTMLFormElement): void {
  const kind = (new FormData(form).get("kind") ?? "catalogue") as Export["kind"];
  byId("export-span").hidden = kind !== "changes";
  byId<HTMLInputElement>("export-since").required = kind === "changes";
  byId("export-kind-hint").textContent = KIND_HINTS[kind];
}

function openNewExport(): Promise<string> {
  const form = byId<HTMLFormElement>("export-form");
  form.reset();
  byId<HTMLInputElement>("export-since").value = localInput(Date.now() - 86_400_000);
  byId<HTMLInputElement>("export-until").max = localInput(Date.now());
  byId<HTMLDetailsElement>("export-destination").open = false;
  byId("export-dialog-title").textContent = environment() === "test" ? "New test export" : "New export";
  showKind(form);
  return openDialog(byId<HTMLDialogElement>("export-dialog"), form.querySelector<HTMLInputElement>('input[name="kind"]:checked'));
}

/** The form as POST /exports takes it: only what is filled in, so the API's defaults and rules apply. */
function requestOf(form: HTMLFormElement): ExportRequest {
  const data = new FormData(form);
  const text = (name: string) => String(data.get(name) ?? "").trim();
  const iso = (name: string) => (text(name) ? new Date(text(name)).toISOString() : undefined);
  const format = text("format") as Export["format"];
  const common = { format, environment: environment() };
  const fields = ["endpoint", "bucket", "prefix", "region", "access_key_id", "secret_access_key"] as const;
  const typed = Object.fromEntries(fields.map((field) => [field, text(`destination.${field}`)]).filter(([, value]) => value));
  const destination = Object.keys(typed).length ? { destination: { type: "s3" as const, ...typed } } : {};
  if (text("kind") === "catalogue") return { kind: "catalogue", ...common, ...destination } as ExportRequest;
  const until = iso("until");
  const schedule = text("schedule");
  return {
    kind: "changes",
    ...common,
    since: iso("since") ?? "",
    ...(until ? { until } : {}),
    ...(schedule ? { schedule: schedule as NonNullable<Export["schedule"]> } : {}),
    ...destination,
  } as ExportRequest;
}

async function start(form: HTMLFormElement): Promise<void> {
  const created = await api<Export>("POST", "/exports", requestOf(form));
  byId<HTMLDialogElement>("export-dialog").close("started");
  await loadExports();
  const card = byId("exports").querySelector<HTMLElement>(`[data-id="${CSS.escape(created.id)}"]`);
  const status = listed.find((job) => job.id === created.id)?.status ?? created.status;
  if (card && status !== "failed") {
    say(
      slotIn(card),
      status === "scheduled"
        ? "Scheduled: the span so far is written now, then each closed hour or day is added."
        : "Started: its progress shows here as it writes.",
    );
    card.querySelector<HTMLElement>("h3")?.focus();
  }
}

export function setUpExports(): void {
  onEnvironmentChanged(() => {
    render();
    pollRunning();
  });
  byId("open-new-export").addEventListener("click", () => void openNewExport());
  const form = byId<HTMLFormElement>("export-form");
  for (const radio of form.querySelectorAll<HTMLInputElement>('input[name="kind"]')) radio.addEventListener("change", () => showKind(form));
  onSubmit(form, () => start(form));
  // The secret leaves the page with the dialog.
  byId("export-dialog").addEventListener("close", () => {
    byId<HTMLInputElement>("export-secret").value = "";
  });
}
