import { ApiFailure } from "./api.ts";
import { clearFieldErrors, inFormWords } from "./form-fields.ts";

/**
 * Small DOM helpers: elements built with textContent only (no HTML strings), inline feedback, dates, "More" menus,
 * and running an action (the modal dialogs are in dialogs.ts).
 *
 * Feedback goes next to what was done: every form, dialog, card and section has its own `.feedback`
 * slot (role="status", so screen readers hear it). Starting any action clears every slot, so a
 * message never outlives the next action.
 */

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
export function actionButton(
  label: string,
  target: string,
  onClick: (button: HTMLButtonElement) => void,
  className = "",
): HTMLButtonElement {
  const button = el("button", { type: "button", class: className }, label, el("span", { class: "visually-hidden" }, ` ${target}`));
  button.addEventListener("click", () => onClick(button));
  return button;
}

/** An empty feedback slot, to put next to a control. */
export const feedbackSlot = (id?: string) => el("p", { class: "feedback", role: "status", ...(id ? { id } : {}) });

export function clearFeedback(): void {
  for (const slot of document.querySelectorAll<HTMLElement>(".feedback")) {
    slot.textContent = "";
    slot.classList.remove("ok", "error");
  }
}

/** Puts a message in one slot (and clears every other one). */
export function say(slot: HTMLElement, text: string, kind: "ok" | "error" = "ok"): void {
  clearFeedback();
  slot.classList.add(kind);
  slot.textContent = text;
}

/** The feedback slot inside `container` (a card, a dialog, a section). */
export function slotIn(container: Element): HTMLElement {
  const slot = container.querySelector<HTMLElement>(".feedback");
  if (!slot) throw new Error("No feedback slot here.");
  return slot;
}

/**
 * The dashboard's one date format (the viewer's locale and clock: "25 Nov 2026, 14:05"), and its
 * date-only form for whole days; relative times ("in 3 days") all come from `relative` below.
 */
const DATE_TIME = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const DATE = new Intl.DateTimeFormat(undefined, { dateStyle: "medium" });
export const formatDateTime = (instant: number | string): string => DATE_TIME.format(new Date(instant));
export const formatDate = (instant: number | string): string => DATE.format(new Date(instant));

/** A date as people read it, in a <time> that keeps the exact value. */
export function when(iso: string | null | undefined, missing = "Never"): Node | string {
  if (!iso) return missing;
  return el("time", { datetime: iso, title: iso }, formatDateTime(iso));
}

/** "in 3 days", "2 hours ago": the distance from now, in the largest unit that fits. */
function relative(iso: string, now = Date.now()): string {
  const seconds = (new Date(iso).getTime() - now) / 1000;
  const units: Array<[Intl.RelativeTimeFormatUnit, number]> = [
    ["year", 31_536_000],
    ["month", 2_592_000],
    ["day", 86_400],
    ["hour", 3_600],
    ["minute", 60],
  ];
  const format = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
  for (const [unit, size] of units) if (Math.abs(seconds) >= size) return format.format(Math.round(seconds / size), unit);
  return format.format(Math.round(seconds), "second");
}

/** A relative date ("expires in 3 days", "2 minutes ago") whose tooltip and datetime keep the absolute one. */
export function whenRelative(iso: string, prefix = ""): HTMLTimeElement {
  return el("time", { datetime: iso, title: formatDateTime(iso) }, prefix ? `${prefix} ${relative(iso)}` : relative(iso));
}

/** Label/value pairs as a description list. */
export function facts(pairs: Array<[string, Node | string]>): HTMLDListElement {
  const list = el("dl", { class: "facts" });
  for (const [term, value] of pairs) list.append(el("div", {}, el("dt", {}, term), el("dd", {}, value)));
  return list;
}

/**
 * A "More" menu (a <details class="more">) of less frequent actions on `target`. Choosing an item
 * closes the menu first, and the focus goes to "More", where a dialog it opens returns it.
 */
export function moreMenu(target: string, ...items: Array<HTMLButtonElement | false>): HTMLDetailsElement {
  const more = el(
    "details",
    { class: "more" },
    el("summary", {}, "More", el("span", { class: "visually-hidden" }, ` actions for ${target}`)),
    el("div", { class: "menu" }, ...items),
  );
  more.addEventListener(
    "click",
    (event) => {
      if (!(event.target instanceof Element) || !event.target.closest(".menu button")) return;
      more.open = false;
      more.querySelector("summary")?.focus();
    },
    { capture: true },
  );
  return more;
}

/** Closes every open "More" menu (a <details class="more">) but `keep`. */
export function closeMenus(keep?: Element | null): void {
  for (const menu of document.querySelectorAll<HTMLDetailsElement>("details.more[open]")) if (menu !== keep) menu.open = false;
}

/**
 * "More" menus behave as menus: Escape closes the open one (the focus goes back to its button), and
 * so does a click anywhere outside it or a dialog opening (openDialog).
 */
export function setUpMenus(): void {
  document.addEventListener("keydown", (event) => {
    const open = document.querySelector<HTMLDetailsElement>("details.more[open]");
    if (event.key !== "Escape" || !open || document.querySelector("dialog[open]")) return;
    open.open = false;
    open.querySelector("summary")?.focus();
  });
  document.addEventListener("click", (event) => closeMenus(event.target instanceof Element ? event.target.closest("details.more") : null));
}

/**
 * Runs a user action: every earlier message goes, `button` is disabled meanwhile, and a failure is
 * shown in `slot`, next to the control that started it.
 */
export async function attempt(action: () => Promise<unknown>, slot: HTMLElement, button?: HTMLButtonElement | null): Promise<void> {
  clearFeedback();
  clearFieldErrors();
  const hadFocus = button && document.activeElement === button;
  if (button) button.disabled = true;
  try {
    await action();
  } catch (error) {
    // A 401 has ended the session: the signed-out page shows why, in its own slot.
    if (!(error instanceof ApiFailure && error.status === 401)) say(slot, error instanceof Error ? error.message : String(error), "error");
  } finally {
    if (button) button.disabled = false;
    // A disabled button cannot keep (or get back) the focus, e.g. from a dialog it opened: return it,
    // unless the action moved the focus somewhere on purpose.
    const lost =
      !document.activeElement || document.activeElement === document.body || document.activeElement.closest("dialog:not([open])");
    if (hadFocus && button.isConnected && lost && !document.querySelector("dialog[open]")) button.focus();
  }
}

/**
 * A form's submit, without the page navigating; its submit button is disabled while it runs, and the API's 400
 * about one of its fields is told in the form's words (form-fields.ts).
 */
export function onSubmit(form: HTMLFormElement, action: () => Promise<unknown>, slot = slotIn(form)): void {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const run = () =>
      action().catch((error: unknown) => {
        throw inFormWords(form, error);
      });
    void attempt(run, slot, form.querySelector<HTMLButtonElement>('button[type="submit"]'));
  });
}
