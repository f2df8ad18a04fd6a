/** Small DOM helpers: elements built with textContent only (no HTML strings), messages, dialogs. */

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (!element) throw new Error(`The page has no #${id}.`);
  return element as T;
}

type Child = Node | string | null | undefined | false;

/** An element with attributes (`true` sets an empty one, `false` leaves it out) and children. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, string | boolean> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== false) element.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) if (child) element.append(child);
  return element;
}

/** A button whose visible text is short and whose accessible name says what it acts on. */
export function actionButton(label: string, target: string, onClick: () => void, className = ""): HTMLButtonElement {
  const button = el("button", { type: "button", class: className }, label, el("span", { class: "visually-hidden" }, ` ${target}`));
  button.addEventListener("click", onClick);
  return button;
}

/** A polite announcement (status line). */
export function announce(text: string): void {
  byId("error").textContent = "";
  byId("status").textContent = text;
}

/** An error, announced at once (role="alert"). */
export function showError(text: string): void {
  byId("status").textContent = "";
  byId("error").textContent = text;
}

export function clearMessages(): void {
  byId("status").textContent = "";
  byId("error").textContent = "";
}

/** A date as people read it, in a <time> that keeps the exact value. */
export function when(iso: string | null | undefined, missing = "Never"): Node | string {
  if (!iso) return missing;
  return el("time", { datetime: iso, title: iso }, new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }));
}

/** Label/value pairs as a description list. */
export function facts(pairs: Array<[string, Node | string]>): HTMLDListElement {
  const list = el("dl", { class: "facts" });
  for (const [term, value] of pairs) list.append(el("div", {}, el("dt", {}, term), el("dd", {}, value)));
  return list;
}

/** Cancel buttons are plain buttons (so Enter in a dialog's field submits, not cancels); they close it. */
export function setUpDialogs(): void {
  for (const button of document.querySelectorAll<HTMLButtonElement>("dialog [data-cancel]")) {
    button.addEventListener("click", () => button.closest("dialog")?.close("cancel"));
  }
}

/** Opens a modal <dialog> whose form has method="dialog"; resolves with the button's value, focus goes back. */
export function openDialog(dialog: HTMLDialogElement, focus?: HTMLElement): Promise<string> {
  const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
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
export async function confirmAction(title: string, text: string, confirmLabel: string): Promise<boolean> {
  const dialog = byId<HTMLDialogElement>("confirm-dialog");
  byId("confirm-title").textContent = title;
  byId("confirm-text").textContent = text;
  byId("confirm-ok").textContent = confirmLabel;
  return (await openDialog(dialog, dialog.querySelector<HTMLElement>("[data-cancel]") ?? undefined)) === "ok";
}

/** Asks for a new name; undefined when cancelled. */
export async function askName(title: string, current: string): Promise<string | undefined> {
  const input = byId<HTMLInputElement>("rename-input");
  byId("rename-title").textContent = title;
  input.value = current;
  const answer = openDialog(byId<HTMLDialogElement>("rename-dialog"), input);
  input.select();
  return (await answer) === "ok" ? input.value.trim() : undefined;
}

/**
 * A secret shown once (a new API key, a webhook's signing secret): the value in a read-only field,
 * a Copy button, and a plain warning. The panel takes the focus so the warning is read first.
 */
export function showOnce(slot: HTMLElement, options: { owner: string; title: string; label: string; value: string; warning: string }): void {
  const id = `${slot.id}-value`;
  const field = el("input", { id, class: "secret", readonly: true, value: options.value, spellcheck: "false", autocomplete: "off" });
  const copy = el("button", { type: "button" }, "Copy");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(options.value);
      announce("Copied to the clipboard.");
    } catch {
      field.select();
      announce("Could not copy automatically; the text is selected, press Ctrl+C (or ⌘C) to copy it.");
    }
  });
  const done = el("button", { type: "button" }, "I have stored it, hide it");
  done.addEventListener("click", () => {
    slot.replaceChildren();
    announce("Hidden. It cannot be shown again.");
  });
  const heading = el("h3", { tabindex: "-1" }, options.title);
  slot.replaceChildren(
    el(
      "div",
      { class: "once", "data-owner": options.owner },
      heading,
      el("p", { class: "warning" }, el("strong", {}, "Copy it now: it will not be shown again. "), options.warning),
      el("label", { for: id }, options.label),
      el("div", { class: "copy-row" }, field, copy),
      done,
    ),
  );
  heading.focus();
}

/** Runs a user action; a failure becomes the message on the page. A button is disabled meanwhile. */
export async function attempt(action: () => Promise<unknown>, button?: HTMLButtonElement | null): Promise<void> {
  if (button) button.disabled = true;
  try {
    await action();
  } catch (error) {
    showError(error instanceof Error ? error.message : String(error));
  } finally {
    if (button) button.disabled = false;
  }
}

/** A form's submit, without the page navigating; its submit button is disabled while it runs. */
export function onSubmit(form: HTMLFormElement, action: () => Promise<unknown>): void {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void attempt(action, form.querySelector<HTMLButtonElement>('button[type="submit"]'));
  });
}

/** Takes away a shown-once secret whose owner (a key, a webhook) has just been revoked or deleted. */
export function dropShownOnce(slot: HTMLElement, owner: string): void {
  slot.querySelector(`[data-owner="${CSS.escape(owner)}"]`)?.remove();
}
