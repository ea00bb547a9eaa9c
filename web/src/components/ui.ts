/**
 * Small UI helpers shared by the pages: toasts, confirmation dialogs, dates, status badges, sortable
 * table headers and field errors.
 */
import { html, nothing, type TemplateResult } from "lit";
import { ApiError } from "../api.ts";
import { errorText } from "./page.ts";
import type { SortState } from "../list_query.ts";

const TOAST_ICONS = {
  primary: { icon: "info-circle" },
  success: { icon: "check2-circle" },
  warning: { icon: "exclamation-triangle" },
  danger: { icon: "exclamation-octagon" },
} as const;

/** Shows a toast (an `sl-alert` in Shoelace's toast stack, announced by screen readers). */
export function notify(
  message: string,
  variant: "primary" | "success" | "warning" | "danger" = "primary",
): void {
  const alert = Object.assign(document.createElement("sl-alert"), {
    variant,
    closable: true,
    duration: variant === "danger" ? 10000 : 4000,
  });
  const icon = document.createElement("sl-icon");
  icon.slot = "icon";
  icon.setAttribute("name", TOAST_ICONS[variant].icon);
  alert.append(icon, document.createTextNode(message));
  // While it fades out the alert is aria-hidden; its close button must not stay focusable meanwhile.
  alert.addEventListener("sl-hide", () => alert.inert = true, { once: true });
  document.body.append(alert);
  void (alert as unknown as { toast(): Promise<void> }).toast();
}

/** Shows the error a person should read as a danger toast. */
export function notifyError(err: unknown): void {
  if (err instanceof ApiError && err.status === 401) return;
  notify(errorText(err), "danger");
}

/**
 * Opens a Shoelace dialog that a component has just rendered, once the dialog has rendered itself: opened
 * before that, Shoelace shows it without its opening sequence, which moves the focus into the modal (and
 * back to the trigger when it closes), so the focus would stay on the button behind.
 */
export async function openDialog(dialog: Element | null): Promise<void> {
  const d = dialog as (HTMLElement & { updateComplete: Promise<unknown>; show(): Promise<void> }) | null;
  if (!d) return;
  await d.updateComplete;
  await d.show();
}

/** Options of {@link confirmAction}. */
export interface ConfirmOptions {
  title: string;
  message: string | TemplateResult;
  confirmLabel: string;
  /** The other button's text (default "Cancel"). */
  cancelLabel?: string;
  danger?: boolean;
  /** When set, the person must type this text before the button enables (for destructive actions). */
  typeToConfirm?: string;
}

/**
 * A confirmed action of a list (a delete, mostly): asks `confirm`; when confirmed runs `steps.run`, says
 * `steps.done` (when given) and calls `steps.then` (the page's reload). A refusal becomes a toast.
 */
export async function confirmThenRun(
  confirm: ConfirmOptions,
  steps: { run: () => Promise<unknown>; done?: string; then: () => Promise<void> },
): Promise<void> {
  if (!await confirmAction(confirm)) return;
  try {
    await steps.run();
    if (steps.done) notify(steps.done, "success");
    await steps.then();
  } catch (err) {
    notifyError(err);
  }
}

/**
 * The `sl-after-hide` listener of a dialog: runs `close` when the dialog itself has hidden, not when a
 * tooltip, select or dropdown inside it (whose `sl-after-hide` bubbles) has.
 */
export function whenHidden(close: () => void): (e: Event) => void {
  return (e) => {
    if (e.target === e.currentTarget) close();
  };
}

/** Asks for confirmation in a modal dialog; resolves true when confirmed. Focus returns where it was. */
export function confirmAction(options: ConfirmOptions): Promise<boolean> {
  const previous = document.activeElement as HTMLElement | null;
  return new Promise((resolve) => {
    const dialog = document.createElement("svc-confirm-dialog") as HTMLElement & {
      options: ConfirmOptions;
    };
    dialog.options = options;
    dialog.addEventListener("svc-confirm-done", (e) => {
      dialog.remove();
      previous?.focus?.();
      resolve((e as CustomEvent<boolean>).detail);
    }, { once: true });
    document.body.append(dialog);
  });
}

/** A date and time in the person's locale, or a dash. */
export function formatDate(value: string | null | undefined): string {
  if (!value) return "—";
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return value;
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

/** "in 3 days" / "5 hours ago". */
export function relativeTime(value: string | null | undefined, now = Date.now()): string {
  if (!value) return "never";
  const diff = new Date(value).getTime() - now;
  if (Number.isNaN(diff)) return value;
  const units: Array<[Intl.RelativeTimeFormatUnit, number]> = [
    ["day", 86400000],
    ["hour", 3600000],
    ["minute", 60000],
  ];
  const fmt = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
  for (const [unit, ms] of units) {
    if (Math.abs(diff) >= ms) return fmt.format(Math.round(diff / ms), unit);
  }
  return fmt.format(Math.round(diff / 1000), "second");
}

const BADGE_VARIANTS: Record<string, string> = {
  online: "success",
  compliant: "success",
  released: "success",
  enabled: "success",
  success: "success",
  degraded: "warning",
  non_compliant: "danger",
  error: "danger",
  failure: "danger",
  denied: "danger",
  offline: "neutral",
  unknown: "neutral",
  inapplicable: "neutral",
  archived: "neutral",
  disabled: "neutral",
  draft: "primary",
};

/** Human words for status values. */
export function statusLabel(value: string): string {
  const v = normalizeStatus(value);
  return v.replaceAll("_", " ").replace(/^./, (c) => c.toUpperCase());
}

/** `COMPLIANCE_STATUS_NON_COMPLIANT` → `non_compliant`; other values lower-cased. */
export function normalizeStatus(value: string): string {
  return (value ?? "unknown").toLowerCase().replace(/^compliance_status_/, "");
}

/**
 * A compliance status as the console words it. A policy that reaches a node with no report on its current
 * version is stored and filtered as `unknown`; the console calls it "Pending", the rollout's word for it.
 */
export function complianceLabel(value: string): string {
  const v = normalizeStatus(value);
  return v === "unknown" ? "Pending" : statusLabel(v);
}

/** A compliance status as a badge, worded by {@link complianceLabel} (pending looks as in the rollout). */
export function complianceBadge(value: string): TemplateResult {
  const v = normalizeStatus(value);
  if (v !== "unknown") return statusBadge(v);
  return html`<sl-badge class="status" variant="warning" pill>${complianceLabel(v)}</sl-badge>`;
}

/** A status as a coloured badge with text (colour is never the only signal). */
export function statusBadge(value: string): TemplateResult {
  const v = normalizeStatus(value);
  return html`<sl-badge class="status" variant=${BADGE_VARIANTS[v] ?? "neutral"} pill>${
    statusLabel(v)
  }</sl-badge>`;
}

export type { SortState };

/** Plain column header cells, one per label, in order. */
export function columns(...labels: string[]): TemplateResult[] {
  return labels.map((label) => html`<th scope="col">${label}</th>`);
}

/** A table header cell that sorts on click, with `aria-sort`. */
export function sortHeader(
  label: string,
  key: string,
  sort: SortState,
  onSort: (next: SortState) => void,
): TemplateResult {
  const active = sort.key === key;
  const ariaSort = active ? (sort.dir === "asc" ? "ascending" : "descending") : "none";
  const next: SortState = { key, dir: active && sort.dir === "asc" ? "desc" : "asc" };
  return html`
    <th scope="col" aria-sort=${ariaSort}>
      <button class="sort" type="button" @click=${() => onSort(next)}>
        ${label}<span aria-hidden="true" class="sort-mark">${active
          ? (sort.dir === "asc" ? "▲" : "▼")
          : "↕"}</span>
      </button>
    </th>
  `;
}

/** The server's message for a field, for an input's `help-text`. */
export function fieldError(err: unknown, field: string): string {
  return err instanceof ApiError ? err.fieldMessage(field) ?? "" : "";
}

/** A form's error above its fields, unless the server named fields (their messages stand at the fields). */
export function formError(err: unknown): TemplateResult | typeof nothing {
  return err && !(err instanceof ApiError && err.fields.length) ? errorAlert(err) : nothing;
}

/**
 * The name and description fields of a small record's dialog (a role, a user group), with the server's
 * message at the name.
 */
export function nameDescriptionFields(
  record: { name?: string; description?: string },
  options: { err: unknown; readOnly?: boolean },
): TemplateResult {
  const { err, readOnly = false } = options;
  return html`
    <sl-input name="name" label="Name" value=${record.name ?? ""} ?disabled=${readOnly}
      class=${fieldError(err, "name") ? "has-error" : ""} help-text=${fieldError(err, "name")}></sl-input>
    <sl-textarea name="description" label="Description" rows="2" value=${record.description ?? ""}
      ?disabled=${readOnly}></sl-textarea>
  `;
}

/** An alert with a request error and its field list; nothing when there is no error. */
export function errorAlert(err: unknown): TemplateResult | typeof nothing {
  if (!err) return nothing;
  const fields = err instanceof ApiError ? err.fields : [];
  return html`
    <sl-alert variant="danger" open class="form-error">
      <sl-icon slot="icon" name="exclamation-octagon"></sl-icon>
      ${errorText(err)} ${fields.length > 1
        ? html`<ul>${fields.map((f) => html`<li><code>${f.field}</code>: ${f.message}</li>`)}</ul>`
        : nothing}
    </sl-alert>
  `;
}

/** Reads a Shoelace form control's value from an input event. */
export function valueOf(event: Event): string {
  return String((event.target as HTMLInputElement).value ?? "");
}

/** Downloads text as a file (export buttons). */
export function downloadText(filename: string, text: string, type = "application/json"): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = Object.assign(document.createElement("a"), { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/**
 * An `sl-option` value for arbitrary text: Shoelace turns spaces in option values into underscores, so
 * `Debian GNU/Linux` would come back as `Debian_GNU/Linux`; percent-encoding keeps every character.
 * {@link fromOptionValue} undoes it.
 */
export function toOptionValue(text: string): string {
  return encodeURIComponent(text);
}

/** The text of an option value made by {@link toOptionValue}. */
export function fromOptionValue(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
