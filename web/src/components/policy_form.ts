/**
 * The parts of a policy form that the editor of existing policies and the guided "New policy" flow share:
 * validation by the shared registry, the type tiles, what a type says about itself, and the Settings section
 * (the type's own form or the generated one, and the JSON view of the same value, with the problems found as
 * you type). Functions returning templates; the page owns the state and passes its handlers in.
 */
import { html, nothing, type TemplateResult } from "lit";
import { html as staticHtml, unsafeStatic } from "lit/static-html.js";
import {
  getPolicyType,
  validatePolicyContent,
  type ValidationIssue,
} from "../../../shared/policy_types/mod.ts";
import type { JsonObject } from "../content.ts";
import { editorFor, type EditorSpec } from "../editors/mod.ts";
import { labelIssues } from "../editors/enum_labels.ts";
import { policyTypeInfo } from "../editors/type_info.ts";
import docsJson from "../editors/proto_docs.gen.json" with { type: "json" };
import "../editors/schema_form.ts";
// Defines the types' own form elements (an editor's formTag), found by `deno task proto`.
import "../editors/forms.gen.ts";

/** The type tiles' look (the console's CSP allows inline styles). */
const TILE_STYLE = html`<style>
  .type-tiles { border: 0; padding: 0; margin: 0; display: grid; gap: 0.5rem;
    grid-template-columns: repeat(auto-fill, minmax(14rem, 1fr)); }
  .type-tiles legend { font-weight: 600; margin-bottom: 0.5rem; }
  .type-tile { display: grid; grid-template-columns: auto 1fr; column-gap: 0.5rem; align-items: start;
    padding: 0.6rem 0.75rem; border: 1px solid var(--sl-color-neutral-300);
    border-radius: var(--sl-border-radius-medium); cursor: pointer; }
  .type-tile:has(input:checked) { border-color: var(--sl-color-primary-600);
    background: var(--sl-color-primary-50); }
  .type-tile:has(input:focus-visible) { outline: 2px solid var(--sl-color-primary-600); outline-offset: 2px; }
  .type-tile input { margin-top: 0.2rem; }
  .type-tile-label { font-weight: 600; }
  .type-tile-description { grid-column: 2; color: var(--sl-color-neutral-700); font-size: 0.875rem; }
</style>`;

const DOCS = docsJson as Record<string, { doc?: string }>;

/** What a type's content message says about itself, without the notes for protocol maintainers. */
export function typeSummary(type: string): string[] {
  const def = getPolicyType(type);
  const doc = def ? DOCS[def.schema.typeName]?.doc ?? "" : "";
  return doc.split("\n\n")
    .filter((p) => !p.startsWith("Field numbers are permanent") && !/protojson|json_name/.test(p))
    .map((p) => p.replace(/^Content of a policy of type "[^"]+"[:.]\s*/, ""))
    .filter((p) => p !== "")
    .map((p) => p[0].toUpperCase() + p.slice(1));
}

/** A type's own form element (`EditorSpec.formTag`), or undefined for the generated form. */
function typeForm(
  editor: EditorSpec,
  props: {
    value: JsonObject;
    issues: ValidationIssue[];
    readOnly: boolean;
    onChange: (e: CustomEvent<JsonObject>) => void;
  },
): TemplateResult | undefined {
  if (!editor.formTag) return undefined;
  const name = unsafeStatic(editor.formTag);
  return staticHtml`<${name} .value=${props.value} .issues=${props.issues} ?read-only=${props.readOnly}
    @value-change=${props.onChange}></${name}>`;
}

/**
 * Problems of `value` for `type`, by the shared validator; paths without the `content.` prefix, enum
 * constants with the labels the form shows for them.
 */
export function validate(type: string, value: JsonObject): ValidationIssue[] {
  try {
    return labelIssues(type, validatePolicyContent(type, JSON.stringify(value)));
  } catch (err) {
    return labelIssues(type, [{ field: "", message: (err as Error).message }]);
  }
}

/**
 * The type of a new policy, chosen from tiles naming what each type manages (native radio buttons: Tab
 * reaches the group, arrows move between types).
 */
export function renderTypeTiles(options: {
  types: string[];
  selected: string;
  error: string;
  onPick: (type: string) => void;
}): TemplateResult {
  const { error } = options;
  return html`
    ${TILE_STYLE}
    <fieldset class="type-tiles ${error ? "has-error" : ""}">
      <legend>Type <span class="muted">(cannot be changed once the policy exists)</span></legend>
      ${options.types.map((t) => {
        const info = policyTypeInfo(t);
        return html`
          <label class="type-tile" data-type=${t}>
            <input type="radio" name="type" value=${t} .checked=${options.selected === t}
              @change=${() => options.onPick(t)}>
            <span class="type-tile-label">${info.label}</span>
            <span class="type-tile-description">${info.description}</span>
          </label>
        `;
      })}
      ${error ? html`<p class="field-error">${error}</p>` : nothing}
    </fieldset>
  `;
}

/** What {@link renderSettingsSection} draws from. */
export interface SettingsState {
  type: string;
  value: JsonObject;
  /** Problems of the value (all of them; hidden while `untouched`). */
  issues: ValidationIssue[];
  editable: boolean;
  /** A new policy nobody has changed yet: no problems shown before the first change. */
  untouched: boolean;
  view: "form" | "json";
  jsonError: string | undefined;
  onValue: (e: CustomEvent<JsonObject>) => void;
  onJson: (text: string) => void;
  onView: (view: "form" | "json") => void;
}

/** The Settings section: validation summary, the type's form (or the generated one) and the JSON view. */
export function renderSettingsSection(s: SettingsState): TemplateResult {
  const def = getPolicyType(s.type);
  const issues = s.untouched ? [] : s.issues;
  const general = issues.filter((i) => i.field === "");
  return html`
    <section aria-label="Content" class="policy-content">
      <h2>Settings</h2>
      ${s.untouched
        ? html`<p class="validation-summary muted" role="status">
          Choose the settings this policy manages; problems are shown once you start.</p>`
        : html`<p class="validation-summary ${s.issues.length ? "field-error" : "muted"}" role="status">
          ${
          s.issues.length === 0
            ? "No problems found."
            : `${s.issues.length} problem${s.issues.length === 1 ? "" : "s"} to fix before saving.`
        }
          ${
          general.map((i) =>
            html`<span class="general-issue"> ${i.message[0].toUpperCase()}${i.message.slice(1)}.</span>`
          )
        }
        </p>`}
      <sl-tab-group @sl-tab-show=${(e: CustomEvent<{ name: string }>) =>
        s.onView(e.detail.name as "form" | "json")}>
        ${def ? html`<sl-tab slot="nav" panel="form" ?active=${s.view === "form"}>Form</sl-tab>` : nothing}
        <sl-tab slot="nav" panel="json" ?active=${s.view === "json" || !def}>JSON</sl-tab>
        ${def
          ? html`
            <sl-tab-panel name="form" ?active=${s.view === "form"}>
              ${typeForm(editorFor(s.type), {
                value: s.value,
                issues,
                readOnly: !s.editable,
                onChange: s.onValue,
              }) ??
                html`
                  <svc-schema-form .schema=${def.schema} .value=${s.value} .issues=${issues}
                    .hints=${editorFor(s.type).hints} ?read-only=${!s.editable} @value-change=${s
                      .onValue}></svc-schema-form>
                `}
            </sl-tab-panel>
          `
          : nothing}
        <sl-tab-panel name="json" ?active=${s.view === "json" || !def}>
          ${!def
            ? html`<p class="muted">The server does not know the type ${s.type}; edit its content as JSON.</p>`
            : nothing}
          <sl-textarea label="Content (JSON)" rows="18" ?disabled=${!s.editable}
            value=${JSON.stringify(s.value, null, 2)} help-text=${s.jsonError ?? ""}
            class=${s.jsonError ? "json-view has-error" : "json-view"}
            @sl-change=${(e: Event) =>
              s.onJson(String((e.target as HTMLTextAreaElement).value))}></sl-textarea>
          ${issues.length
            ? html`<ul class="field-error">${
              issues.map((i) => html`<li><code>${i.field || "(content)"}</code>: ${i.message}</li>`)
            }</ul>`
            : nothing}
        </sl-tab-panel>
      </sl-tab-group>
    </section>
  `;
}

/**
 * Reads the JSON view's text: the parsed object, or why it cannot be the content (for `jsonError`).
 */
export function parseJsonView(text: string): { value?: JsonObject; error?: string } {
  try {
    const parsed = JSON.parse(text);
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      return { error: "The content must be a JSON object ({ … })." };
    }
    return { value: parsed };
  } catch (err) {
    return { error: `Not valid JSON: ${(err as Error).message}` };
  }
}
