/**
 * What one content changes against another, as an admin reads it: a table of the settings by the names the
 * editor gives them, each with its old and new value (entries of a list setting one by one, see
 * `setting_diff.ts`), and the description; the raw JSON line diff stays available folded underneath for
 * whoever wants the exact text. Used for a revision against the released version and for each released
 * version against the one before it. The line diff is a longest common subsequence over lines; policy
 * contents are small.
 */
import { html, nothing, type TemplateResult } from "lit";
import type { JsonObject } from "../content.ts";
import { type SettingChange, settingDiff } from "../setting_diff.ts";

/** One line of a diff. */
export interface DiffLine {
  kind: "same" | "removed" | "added";
  text: string;
}

function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value).sort().map((k) => [k, sortedKeys((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

/** The content as the raw diff shows it: indented JSON with sorted keys. */
export function diffText(value: JsonObject): string {
  return JSON.stringify(sortedKeys(value), null, 2);
}

/** Line diff of `before` → `after`. */
export function lineDiff(before: string, after: string): DiffLine[] {
  const a = before.split("\n");
  const b = after.split("\n");
  const n = a.length;
  const m = b.length;
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      out.push({ kind: "same", text: a[i] });
      i++;
      j++;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push({ kind: "removed", text: a[i++] });
    else out.push({ kind: "added", text: b[j++] });
  }
  while (i < n) out.push({ kind: "removed", text: a[i++] });
  while (j < m) out.push({ kind: "added", text: b[j++] });
  return out;
}

/** One side of a comparison. */
export interface DiffSide {
  /** What the column is called ("Version 3", "This revision"). */
  label: string;
  description: string;
  value: JsonObject;
}

const KIND_WORD: Record<SettingChange["kind"], string> = {
  added: "Added",
  removed: "Removed",
  changed: "Changed",
};

function changeRows(changes: SettingChange[]): TemplateResult[] {
  return changes.map((c) =>
    html`
      <tr data-key=${c.key} data-kind=${c.kind} class="setting-change">
        <th scope="row">${c.label}<div class="muted"><code>${c.key}</code> · ${KIND_WORD[c.kind]}</div></th>
        <td class="diff-old">${c.from === undefined
          ? html`<span class="muted">(not set)</span>`
          : html`<del>${c.from}</del>`}</td>
        <td class="diff-new">${c.to === undefined
          ? html`<span class="muted">(not set)</span>`
          : html`<ins>${c.to}</ins>`}</td>
      </tr>
      ${(c.entries ?? []).map((e) =>
        html`
          <tr class="entry-change" data-kind=${e.kind}>
            <th scope="row"><span class="visually-hidden">${c.label}, entry </span>↳ ${e.entry}
              <div class="muted">${KIND_WORD[e.kind]}</div></th>
            <td class="diff-old">${e.from === undefined ? "" : html`<del>${e.from}</del>`}</td>
            <td class="diff-new">${e.to === undefined ? "" : html`<ins>${e.to}</ins>`}</td>
          </tr>
        `
      )}
    `
  );
}

/**
 * The changes from `before` to `after` of a policy of `type`: a summary line, the description, the settings
 * table (caption `caption`) and the raw JSON diff folded. Returns the parts, for a section of the caller's.
 */
export function renderSettingChanges(options: {
  type: string;
  before: DiffSide;
  after: DiffSide;
  /** Said when nothing changed. */
  unchanged: string;
}): TemplateResult {
  const { type, before, after } = options;
  const changes = settingDiff(type, before.value, after.value);
  const description = before.description !== after.description;
  const lines = lineDiff(diffText(before.value), diffText(after.value));
  const n = changes.length;
  return html`
    <p class="muted diff-summary" role="status">
      ${n === 0 && !description
        ? options.unchanged
        : `${n === 0 ? "No setting" : `${n} setting${n === 1 ? "" : "s"}`} changed${
          description ? ", and the description" : ""
        }.`}
    </p>
    ${description
      ? html`<p class="diff-description">Description: <del>${before.description || "(no description)"}</del>
        → <ins>${after.description || "(no description)"}</ins></p>`
      : nothing}
    ${n
      ? html`
        <div class="table-wrap">
          <table class="data setting-diff">
            <caption class="visually-hidden">Settings changed from ${before.label} to ${after.label}</caption>
            <thead>
              <tr>
                <th scope="col">Setting</th>
                <th scope="col">${before.label}</th>
                <th scope="col">${after.label}</th>
              </tr>
            </thead>
            <tbody>${changeRows(changes)}</tbody>
          </table>
        </div>
        <sl-details summary="Raw JSON changes" class="raw-diff">
          <pre class="diff" tabindex="0" aria-label="JSON diff">${lines.map((l) =>
            l.kind === "same"
              ? html`<span class="diff-same">  ${l.text}\n</span>`
              : l.kind === "removed"
              ? html`<del class="diff-removed">- ${l.text}\n</del>`
              : html`<ins class="diff-added">+ ${l.text}\n</ins>`
          )}</pre>
        </sl-details>
      `
      : nothing}
  `;
}

/** The diff panel of a revision: the released version on one side, the revision on the other. */
export function renderContentDiff(options: {
  type: string;
  releasedVersion: number;
  released: { description: string; value: JsonObject };
  revision: { description: string; value: JsonObject };
}): TemplateResult {
  return html`
    <section class="card revision-diff" aria-label="Changes against the released version">
      <h2>Changes against version ${options.releasedVersion}</h2>
      ${renderSettingChanges({
        type: options.type,
        before: { label: `Version ${options.releasedVersion}`, ...options.released },
        after: { label: "This revision", ...options.revision },
        unchanged: "No changes yet: the revision equals the released version.",
      })}
    </section>
  `;
}
