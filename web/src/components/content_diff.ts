/**
 * What a revision changes against the released version: a line diff of the two contents pretty-printed as
 * JSON (keys sorted, so reordering alone is no change) and of the descriptions, shown as removed and added
 * lines with a count. Longest-common-subsequence over lines; policy contents are small.
 */
import { html, nothing, type TemplateResult } from "lit";
import type { JsonObject } from "../content.ts";

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

/** The content as the diff shows it: indented JSON with sorted keys. */
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

/** The diff panel: released version on one side, the revision on the other. */
export function renderContentDiff(options: {
  releasedVersion: number;
  released: { description: string; value: JsonObject };
  revision: { description: string; value: JsonObject };
}): TemplateResult {
  const lines = lineDiff(diffText(options.released.value), diffText(options.revision.value));
  const changed = lines.filter((l) => l.kind !== "same").length;
  const description = options.released.description !== options.revision.description;
  return html`
    <section class="card revision-diff" aria-label="Changes against the released version">
      <h2>Changes against version ${options.releasedVersion}</h2>
      <p class="muted diff-summary" role="status">
        ${changed === 0 && !description
          ? "No changes yet: the revision equals the released version."
          : `${changed} changed line${changed === 1 ? "" : "s"} in the settings${
            description ? ", and the description" : ""
          }.`}
      </p>
      ${description
        ? html`<p class="diff-description"><del>${options.released.description || "(no description)"}</del>
          → <ins>${options.revision.description || "(no description)"}</ins></p>`
        : nothing}
      ${changed
        ? html`<pre class="diff" tabindex="0" aria-label="Settings diff">${
          lines.map((l) =>
            l.kind === "same"
              ? html`<span class="diff-same">  ${l.text}\n</span>`
              : l.kind === "removed"
              ? html`<del class="diff-removed">- ${l.text}\n</del>`
              : html`<ins class="diff-added">+ ${l.text}\n</ins>`
          )
        }</pre>`
        : nothing}
    </section>
  `;
}
