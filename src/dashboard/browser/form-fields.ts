/**
 * The forms' fields and the API's words about them. Every control is named by the wire field it fills
 * (`allowed_ips`, `filters.price_below`), so a 400 naming a field path ("Invalid body: allowed_ips.0: …",
 * src/http/field-detail.ts) is told in the form's words ("Allowed IP addresses, line 1: …") by one function, with
 * the form's own label: the rules stay the API's, and no dialog keeps its own copy of them or of the labels.
 */
import { readFieldDetail } from "../../http/field-detail.ts";
import { ApiFailure } from "./api.ts";

type Control = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;

/**
 * A list typed into a textarea: one entry a line, or, with `data-list="words"` (addresses), also split at spaces and
 * commas. Each entry keeps its line, so an error about the API's entry N names the line the person typed it on.
 */
export function listEntries(area: HTMLTextAreaElement): Array<{ value: string; line: number }> {
  const separator = area.dataset.list === "words" ? /[\s,]+/ : /\n/;
  return area.value
    .split("\n")
    .flatMap((text, i) => text.split(separator).map((value) => ({ value: value.trim(), line: i + 1 })))
    .filter((entry) => entry.value);
}

/** A field's name as its form shows it: the label (or a checkbox group's legend), without "(optional …)". */
function labelOf(control: Control): string {
  const grouped = control instanceof HTMLInputElement && (control.type === "checkbox" || control.type === "radio");
  const label = grouped ? control.closest("fieldset")?.querySelector("legend") : control.labels?.[0];
  return (label?.textContent ?? control.name).replace(/\s*\(optional[^)]*\)\s*$/, "").trim();
}

function controlNamed(form: HTMLFormElement, name: string): Control | undefined {
  const found = form.elements.namedItem(name);
  const control = found instanceof RadioNodeList ? found[0] : found;
  const isControl = control instanceof HTMLInputElement || control instanceof HTMLSelectElement || control instanceof HTMLTextAreaElement;
  return isControl ? control : undefined;
}

/** "Allowed IP addresses, line 2" for entry 1 of a list typed one a line; the label alone for any other field. */
function placeOf(control: Control, index: number | undefined): string {
  const label = labelOf(control);
  if (index === undefined || !(control instanceof HTMLTextAreaElement)) return label;
  const line = listEntries(control)[index]?.line;
  return line ? `${label}, line ${line}` : label;
}

/** Marks every field valid again and removes the messages under them (when an action starts or a dialog opens). */
export function clearFieldErrors(): void {
  for (const control of document.querySelectorAll("[aria-invalid]")) {
    control.removeAttribute("aria-invalid");
    control.removeAttribute("aria-errormessage");
  }
  for (const message of document.querySelectorAll(".field-error")) message.remove();
}

/**
 * The API's 400 about a field of `form`, told in the form's words: the field's label (and line), the API's message
 * with any other field it names labelled too. The field is marked invalid and takes the focus (opening the
 * <details> it sits in). Any other error comes back as it was.
 */
export function inFormWords(form: HTMLFormElement, error: unknown): unknown {
  if (!(error instanceof ApiFailure) || error.status !== 400) return error;
  const detail = readFieldDetail(error.message);
  if (!detail) return error;
  const name = detail.path.filter((segment) => typeof segment === "string").join(".");
  const control = controlNamed(form, name);
  if (!control) return error;
  const index = detail.path.find((segment) => typeof segment === "number");
  // Other fields the message names ("is required with price_below"): a wire name has an underscore, a word does not.
  const message = detail.message.replace(/\b[a-z]+(?:_[a-z0-9]+)+\b/g, (wire) => {
    const named = [...form.elements].find(
      (element): element is Control => "name" in element && typeof element.name === "string" && element.name.split(".").at(-1) === wire,
    );
    return named ? `“${labelOf(named)}”` : wire;
  });
  const words = `${placeOf(control, index)}: ${message}`;
  // Under the field too: a long form's own message slot, at its end, may be out of sight.
  const note = document.createElement("p");
  note.className = "field-error";
  note.id = `${control.id}-error`;
  note.textContent = words;
  control.after(note);
  control.setAttribute("aria-invalid", "true");
  control.setAttribute("aria-errormessage", note.id);
  const details = control.closest("details");
  if (details) details.open = true;
  control.focus();
  return new ApiFailure(400, words);
}
