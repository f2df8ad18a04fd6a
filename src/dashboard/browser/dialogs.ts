/**
 * The page's modal dialogs (their markup: src/dashboard/page-dialogs.ts): opening one with the focus handled,
 * the shared confirmation, rename and rotate dialogs, and a secret shown once.
 */
import { byId, clearFeedback, closeMenus, el, feedbackSlot, say } from "./dom.ts";
import { clearFieldErrors } from "./form-fields.ts";

/** Cancel buttons are plain buttons (so Enter in a dialog's field submits, not cancels); they close it. */
export function setUpDialogs(): void {
  for (const button of document.querySelectorAll<HTMLButtonElement>("dialog [data-cancel]")) {
    button.addEventListener("click", () => button.closest("dialog")?.close("cancel"));
  }
}

/** Opens a modal <dialog>; resolves with its return value when it closes, and focus goes back to the opener. */
export function openDialog(dialog: HTMLDialogElement, focus?: HTMLElement | null): Promise<string> {
  const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
  closeMenus();
  clearFeedback();
  clearFieldErrors();
  return new Promise((resolve) => {
    dialog.returnValue = "";
    dialog.addEventListener(
      "close",
      () => {
        if (opener?.isConnected) opener.focus();
        resolve(dialog.returnValue);
      },
      { once: true },
    );
    dialog.showModal();
    focus?.focus();
  });
}

/** "Are you sure?" with the consequence spelled out; the safe choice has the focus. */
export async function confirmAction({ title, text, confirm }: { title: string; text: string; confirm: string }): Promise<boolean> {
  const dialog = byId<HTMLDialogElement>("confirm-dialog");
  byId("confirm-title").textContent = title;
  byId("confirm-text").textContent = text;
  byId("confirm-ok").textContent = confirm;
  return (await openDialog(dialog, dialog.querySelector<HTMLElement>("[data-cancel]"))) === "ok";
}

/** Asks for a new name; undefined when cancelled. */
export async function askName({ title, current }: { title: string; current: string }): Promise<string | undefined> {
  const input = byId<HTMLInputElement>("rename-input");
  byId("rename-title").textContent = title;
  input.value = current;
  const answer = openDialog(byId<HTMLDialogElement>("rename-dialog"), input);
  input.select();
  return (await answer) === "ok" ? input.value.trim() : undefined;
}

/**
 * A secret shown once (a new API key, a webhook's signing secret): the value in a read-only field,
 * a Copy button with its own feedback, and a plain warning. The panel takes the focus so the warning is read first.
 */
export function showOnce(slot: HTMLElement, options: { title: string; label: string; value: string; warning: string }): void {
  const id = `${slot.id}-value`;
  const field = el("input", { id, class: "secret", readonly: true, value: options.value, spellcheck: "false", autocomplete: "off" });
  const copied = feedbackSlot();
  const copy = el("button", { type: "button" }, "Copy");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(options.value);
      say(copied, "Copied to the clipboard.");
    } catch {
      field.select();
      say(copied, "Could not copy automatically; the text is selected, press Ctrl+C (or ⌘C) to copy it.");
    }
  });
  const heading = el("h3", { tabindex: "-1" }, options.title);
  slot.replaceChildren(
    el(
      "div",
      { class: "once" },
      heading,
      el("p", { class: "warning" }, el("strong", {}, "Copy it now: it will not be shown again. "), options.warning),
      el("label", { for: id }, options.label),
      el("div", { class: "copy-row" }, field, copy),
      copied,
    ),
  );
  heading.focus();
}

/** Opens the rotate dialog (shared by a key and a webhook's secret) as a fresh form with this wording. */
export function openRotateDialog(kind: "key" | "webhook", wording: { title: string; text: string; ok: string }): Promise<string> {
  const form = byId<HTMLFormElement>("rotate-form");
  form.dataset.kind = kind;
  form.reset();
  form.hidden = false;
  byId("rotate-done").hidden = true;
  byId("rotate-title").textContent = wording.title;
  byId("rotate-text").textContent = wording.text;
  byId("rotate-ok").textContent = wording.ok;
  return openDialog(byId<HTMLDialogElement>("rotate-dialog"), form.querySelector<HTMLInputElement>('input[name="grace"]:checked'));
}

/** Grace-period choice of the rotate dialog, in seconds. */
export function chosenGrace(form: HTMLFormElement): number {
  return Number(new FormData(form).get("grace") ?? 86_400);
}
