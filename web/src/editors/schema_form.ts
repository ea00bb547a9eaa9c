/**
 * `<svc-schema-form>`: a form generated from a policy type's protobuf-es message descriptor. It walks
 * `schema.fields` and edits the protojson value (json_name keys) the server stores:
 *
 * - booleans: set / not set / true / false (an explicit false is a managed value);
 * - strings and numbers: inputs (numbers with their range and unit), or a choice when the field lists its
 *   allowed values;
 * - enums: a choice of the enum's values; repeated scalars: one value per line, or a multiple choice when
 *   the items have allowed values;
 * - messages: nested sections; repeated messages: a list with add and remove; maps: key/value rows;
 * - `google.protobuf.Value`/`ListValue`/`Struct`: JSON text.
 *
 * What a field shows comes from {@link fieldMeta}: for a browser type the shared registry's catalogue (groups
 * in display order, labels, descriptions, allowed values with labels, ranges, deprecation and "Google Chrome
 * only" badges, how lists combine across policies; fields the browser ignores are hidden unless the value sets
 * them), for the other types the .proto comments. Top-level settings are grouped and searchable by label, key
 * and description. Every change fires `value-change` with the new value; problems (`issues`, from the shared
 * validator) are shown next to the innermost field they name.
 */
import { html, nothing, type TemplateResult } from "lit";
import { type DescField, type DescMessage, ScalarType } from "@bufbuild/protobuf";
import type { ValidationIssue } from "../../../shared/policy_types/mod.ts";
import type { JsonObject, JsonValue } from "../content.ts";
import {
  type ChoiceOption,
  type FieldMeta,
  type FormField,
  formModel,
  humanize,
  type MetaSource,
  type ProtoDocs,
  rangeText,
  type Segment,
  setIn,
  visibleFields,
} from "./form_model.ts";
import type { FormHints } from "./spec.ts";
import { enumChoices } from "./enum_labels.ts";
import { boundProperties, LightElement, stateProperties } from "../components/light_element.ts";
import docsJson from "./proto_docs.gen.json" with { type: "json" };

const DOCS = docsJson as ProtoDocs;

const WKT_JSON = new Set(["google.protobuf.Value", "google.protobuf.ListValue", "google.protobuf.Struct"]);
const INT64 = new Set([
  ScalarType.INT64,
  ScalarType.UINT64,
  ScalarType.SINT64,
  ScalarType.FIXED64,
  ScalarType.SFIXED64,
]);

const CHROME_ONLY =
  "Google Chrome only: Chromium does not know this setting, so nodes with Chromium do not get it.";

/** Path as the shared validator names it, in json names and in proto names. */
function pathStrings(segments: Array<{ json: Segment; proto: Segment }>): [string, string] {
  const join = (parts: Segment[]) =>
    parts.reduce<string>(
      (acc, p) =>
        typeof p === "number"
          ? `${acc}[${p}]`
          : /^[A-Za-z_][A-Za-z0-9_]*$/.test(p)
          ? (acc ? `${acc}.${p}` : p)
          : `${acc}[${JSON.stringify(p)}]`,
      "",
    );
  return [join(segments.map((s) => s.json)), join(segments.map((s) => s.proto))];
}

/** What a control shows: its visible label, help, and the constraints it offers. */
interface Label {
  name: TemplateResult | string;
  help?: string;
  options?: readonly ChoiceOption[];
  min?: number;
  max?: number;
  unit?: string;
  format?: string;
}

/** Fields edited by one labelled control (the rest are sections, lists or maps of controls). */
function isLeaf(field: DescField): boolean {
  if (field.fieldKind === "scalar" || field.fieldKind === "enum") return true;
  if (field.fieldKind === "list") return field.listKind !== "message";
  return field.fieldKind === "message" && WKT_JSON.has(field.message.typeName);
}

interface Ctx {
  /** Value path from the root (json names, indices, map keys). */
  path: Segment[];
  /** The same path for matching validator issues: json and proto spellings. */
  names: Array<{ json: Segment; proto: Segment }>;
  /** Catalogue path: `Bookmarks[].Placement`, `Preferences.*.Status`. */
  rule: string;
}

class SvcSchemaForm extends LightElement {
  static override properties = {
    readOnly: { type: Boolean, attribute: "read-only" },
    ...boundProperties("schema", "value", "issues", "hints"),
    ...stateProperties("filter", "onlyConfigured"),
  };
  declare schema: DescMessage;
  declare value: JsonObject;
  declare issues: ValidationIssue[];
  declare hints: FormHints;
  declare readOnly: boolean;
  declare filter: string;
  declare onlyConfigured: boolean;
  /** Issues already shown during the current render, so a section shows only what no inner field does. */
  #shown = new Set<ValidationIssue>();

  constructor() {
    super();
    this.value = {};
    this.issues = [];
    this.hints = {};
    this.readOnly = false;
    this.filter = "";
    this.onlyConfigured = false;
  }

  get #source(): MetaSource {
    return { catalogue: this.hints.catalogue, docs: DOCS, escapeHatch: this.hints.escapeHatch };
  }

  #emit(path: Segment[], v: JsonValue | undefined): void {
    const next = setIn(this.value, path, v);
    this.dispatchEvent(new CustomEvent<JsonObject>("value-change", { detail: next, bubbles: true }));
  }

  /**
   * The problems at `ctx` (and, with `deep`, below it) not shown yet, marked as shown. Inner fields render
   * before their section asks, so a section only shows what none of its fields could place.
   */
  #errors(ctx: Ctx, deep: boolean, reason?: string): TemplateResult[] {
    const paths = pathStrings(ctx.names);
    const mine = this.issues.filter((i) => {
      if (this.#shown.has(i)) return false;
      const f = i.field;
      if (paths.includes(f)) return true;
      return deep && paths.some((p) => f.startsWith(`${p}.`) || f.startsWith(`${p}[`));
    });
    for (const i of mine) this.#shown.add(i);
    return mine
      // The note of an unsupported field already gives the reason the validator repeats.
      .filter((i) => !(reason && i.message.includes(reason)))
      .map((i) => {
        const where = relativePlace(i.field, paths);
        return html`<div class="field-error" role="alert">${where ? `${where}: ` : ""}${i.message}</div>`;
      });
  }

  #get(path: Segment[]): JsonValue | undefined {
    let node: JsonValue | undefined = this.value;
    for (const key of path) {
      if (node === null || typeof node !== "object") return undefined;
      node = (node as Record<string | number, JsonValue>)[key];
    }
    return node;
  }

  #child(ctx: Ctx, field: DescField): Ctx {
    return {
      path: [...ctx.path, field.jsonName],
      names: [...ctx.names, { json: field.jsonName, proto: field.name }],
      rule: ctx.rule ? `${ctx.rule}.${field.jsonName}` : field.jsonName,
    };
  }

  override render() {
    if (!this.schema) return nothing;
    this.#shown = new Set();
    const root: Ctx = { path: [], names: [], rule: "" };
    const filter = this.filter.trim();
    const model = formModel(this.#source, {
      schema: this.schema,
      value: this.value,
      filter,
      onlyConfigured: this.onlyConfigured,
    });
    const many = model.total > 8;
    const groups = model.groups.map((group) => {
      const shownBefore = this.#shown.size;
      const body = group.fields.map((f) => this.#field(f, root));
      if (model.groups.length === 1 && !many) return body;
      // A problem (say, a setting another one requires) opens its group even when nothing in it is set.
      const problems = this.#shown.size > shownBefore;
      return html`
        <sl-details class="setting-group" data-group=${group.name}
          summary=${`${group.name} (${group.configured} of ${group.total} set)`}
          ?open=${!!filter || problems || group.configured > 0 ||
            model.groups.length === 1}>${body}</sl-details>
      `;
    });
    // Only now is it known which problems the visible fields show.
    const elsewhere = this.issues.filter((i) => i.field !== "" && !this.#shown.has(i)).length;
    const reveal = [filter ? "clear the search" : "", this.onlyConfigured ? 'turn "Only configured" off' : ""]
      .filter(Boolean).join(" and ");
    return html`
      ${many
        ? html`
          <div class="toolbar form-search" role="search">
            <sl-input class="setting-search" label="Find a setting" placeholder="Name, key or description" clearable
              value=${this.filter} @sl-input=${(e: Event) =>
                this.filter = String((e.target as HTMLInputElement).value)}>
              <sl-icon name="search" slot="prefix"></sl-icon>
            </sl-input>
            <sl-switch ?checked=${this.onlyConfigured}
              @sl-change=${(e: Event) => this.onlyConfigured = (e.target as HTMLInputElement).checked}>
                      Only configured (${model.configured})</sl-switch>
          </div>
        `
        : nothing}
      ${elsewhere
        ? html`<p class="field-error hidden-issues">${
          elsewhere === 1 ? "1 problem is" : `${elsewhere} problems are`
        } in settings not shown${reveal ? `: ${reveal} to see ${elsewhere === 1 ? "it" : "them"}` : ""}.</p>`
        : nothing}
      ${model.groups.length === 0 ? html`<p class="muted">No setting matches.</p>` : nothing}
      ${groups}
    `;
  }

  /** The visible name of a field: label, badges and key. */
  #name(meta: FieldMeta): TemplateResult {
    const badges: TemplateResult[] = [];
    if (meta.unsupported) {
      badges.push(html`<sl-badge variant="danger" class="badge-unsupported">Not supported</sl-badge>`);
    }
    if (meta.deprecated) {
      badges.push(html`<sl-badge variant="warning" class="badge-deprecated">Deprecated</sl-badge>`);
    }
    if (meta.chromeOnly) {
      badges.push(html`<sl-badge variant="neutral" class="badge-chrome-only">Google Chrome only</sl-badge>`);
    }
    return html`<span class="field-label">${meta.label} ${badges}<code class="field-key">${meta.key}</code></span>`;
  }

  /** Sentences under a field: why it is unsupported or deprecated, Chrome-only, how it merges. */
  #notes(meta: FieldMeta): TemplateResult | typeof nothing {
    const notes: TemplateResult[] = [];
    if (meta.unsupported) {
      notes.push(
        html`<div class="field-note field-unsupported">Ignored by the browser: ${meta.unsupported}.</div>`,
      );
    }
    if (meta.deprecated) {
      notes.push(html`<div class="field-note field-deprecated">Deprecated: ${meta.deprecated}.</div>`);
    }
    if (meta.chromeOnly) notes.push(html`<div class="field-note">${CHROME_ONLY}</div>`);
    if (meta.mergeHint) notes.push(html`<div class="field-note field-merge">${meta.mergeHint}</div>`);
    return notes.length ? html`<div class="field-notes">${notes}</div>` : nothing;
  }

  /** One field below `parent`: its control (labelled, with its help), notes and problems. */
  #field(entry: FormField, parent: Ctx): TemplateResult {
    const { field, meta, configured } = entry;
    const ctx = this.#child(parent, field);
    const value = this.#get(ctx.path);
    const leaf = isLeaf(field);
    const help = [meta.description, rangeText(meta)].filter(Boolean).join(" ") || undefined;
    const lbl: Label = {
      name: leaf ? this.#name(meta) : meta.label,
      help,
      options: meta.options,
      min: meta.min,
      max: meta.max,
      unit: meta.unit,
      format: meta.format,
    };
    // The control first: problems its inner fields show are not repeated on this row.
    const control = this.#control(field, ctx, value, lbl);
    const errors = this.#errors(ctx, true, meta.unsupported);
    const clear = configured && !this.readOnly
      ? html`
        <sl-icon-button name="x-circle" label=${`${meta.unsupported ? "Remove" : "Clear"} ${meta.label}`}
          @click=${() => this.#emit(ctx.path, undefined)}></sl-icon-button>
      `
      : nothing;
    const classes = [
      "field-row",
      leaf && "leaf",
      configured && "configured",
      meta.unsupported && "unsupported",
    ]
      .filter(Boolean).join(" ");
    const key = pathStrings(ctx.names)[0];
    if (leaf) {
      return html`
        <div class=${classes} data-field=${key}>
          <div class="field-main">${control}${this.#notes(meta)}${errors}</div>
          <div>${clear}</div>
        </div>
      `;
    }
    return html`
      <div class=${classes} data-field=${key}>
        <div class="field-name">
          ${this.#name(meta)}
          ${meta.description ? html`<span class="field-doc">${meta.description}</span>` : nothing}
          ${this.#notes(meta)}
        </div>
        <div class="field-control">${control}${errors}</div>
        <div>${clear}</div>
      </div>
    `;
  }

  /** The fields of a nested message at `ctx`. */
  #fields(message: DescMessage, ctx: Ctx, value: JsonValue | undefined): TemplateResult[] {
    return visibleFields(this.#source, { message, rule: ctx.rule, value }).map((f) => this.#field(f, ctx));
  }

  #control(field: DescField, ctx: Ctx, value: JsonValue | undefined, lbl: Label): TemplateResult {
    switch (field.fieldKind) {
      case "scalar":
        return this.#scalar(field.scalar, ctx, value, lbl);
      case "enum":
        return this.#choice(ctx, value, { ...lbl, options: enumChoices(field.enum) });
      case "message":
        if (WKT_JSON.has(field.message.typeName)) return this.#jsonText(ctx, value, lbl);
        return this.#message(field.message, ctx, value, String(lbl.name));
      case "list":
        if (field.listKind === "message") return this.#messageList(field.message, ctx, value);
        if (field.listKind === "enum") {
          return this.#multiChoice(ctx, value, { ...lbl, options: enumChoices(field.enum) });
        }
        if (lbl.options && fitsOptions(value, lbl.options)) return this.#multiChoice(ctx, value, lbl);
        return this.#scalarList(field.scalar, ctx, value, lbl);
      case "map":
        return this.#map(field, ctx, value);
    }
  }

  #scalar(scalar: ScalarType, ctx: Ctx, value: JsonValue | undefined, lbl: Label): TemplateResult {
    if (scalar === ScalarType.BOOL) {
      return html`
        <sl-select size="small" placeholder="Not managed" clearable hoist ?disabled=${this.readOnly}
          help-text=${lbl.help ?? ""} value=${value === undefined ? "" : String(value)}
          @sl-change=${(e: Event) => {
            const v = String((e.target as HTMLSelectElement).value);
            this.#emit(ctx.path, v === "" ? undefined : v === "true");
          }}>
          <span slot="label">${lbl.name}</span>
          <sl-option value="true">true (on)</sl-option>
          <sl-option value="false">false (off)</sl-option>
        </sl-select>
      `;
    }
    if (lbl.options?.length) {
      // A comma-separated list of allowed parts (`"negotiate,ntlm"`): a multiple choice while every part is known.
      if (lbl.format === "comma_list") {
        const parts = typeof value === "string" ? value.split(",").map((p) => p.trim()).filter(Boolean) : [];
        if (fitsOptions(parts, lbl.options)) return this.#multiChoice(ctx, parts, lbl, ",");
      } else {
        return this.#choice(ctx, value, lbl, scalar !== ScalarType.STRING);
      }
    }
    const numeric = scalar !== ScalarType.STRING && scalar !== ScalarType.BYTES;
    return html`
      <sl-input size="small" ?disabled=${this.readOnly} type=${numeric ? "number" : "text"}
        min=${lbl.min ?? nothing} max=${lbl.max ?? nothing}
        help-text=${lbl.help ?? ""} value=${value === undefined || value === null
          ? ""
          : String(value)} placeholder="Not managed"
        @sl-change=${(e: Event) => {
          const raw = String((e.target as HTMLInputElement).value);
          if (raw === "") return this.#emit(ctx.path, undefined);
          if (!numeric) return this.#emit(ctx.path, raw);
          this.#emit(ctx.path, INT64.has(scalar) ? raw : Number(raw));
        }}><span slot="label">${lbl.name}</span>${lbl.unit
          ? html`<span slot="suffix" class="unit">${lbl.unit}</span>`
          : nothing}</sl-input>
    `;
  }

  #choice(ctx: Ctx, value: JsonValue | undefined, lbl: Label, numeric = false): TemplateResult {
    const allowed = lbl.options ?? [];
    // A stored value outside the allowed ones stays visible (and is reported) instead of reading "Not managed".
    const options = value === undefined || value === null || allowed.some((o) => o.value === value)
      ? allowed
      : [...allowed, { value: value as string | number, label: `${value} (not allowed)` }];
    // sl-option values cannot contain spaces or be empty, so options are addressed by index.
    const index = options.findIndex((o) => o.value === value);
    return html`
      <sl-select size="small" placeholder="Not managed" clearable hoist ?disabled=${this.readOnly}
        help-text=${lbl.help ?? ""} value=${index >= 0 ? `o${index}` : ""}
        @sl-change=${(e: Event) => {
          const v = String((e.target as HTMLSelectElement).value);
          const chosen = v === "" ? undefined : options[Number(v.slice(1))]?.value;
          this.#emit(ctx.path, chosen === undefined ? undefined : numeric ? Number(chosen) : chosen);
        }}>
            <span slot="label">${lbl.name}</span>
            ${options.map((o, i) => optionTemplate(o, i))}
          </sl-select>
    `;
  }

  /** A choice of several allowed values: a list, or with `joiner` one string of parts (`"basic,ntlm"`). */
  #multiChoice(ctx: Ctx, value: JsonValue | undefined, lbl: Label, joiner?: string): TemplateResult {
    const options = lbl.options ?? [];
    const chosen = Array.isArray(value) ? value : [];
    return html`
      <sl-select size="small" multiple clearable hoist placeholder="None" ?disabled=${this.readOnly}
        help-text=${lbl.help ?? ""} .value=${chosen.map((c) => `o${options.findIndex((o) => o.value === c)}`)}
        @sl-change=${(e: Event) => {
          const v = (e.target as unknown as { value: string[] }).value;
          const items = v.map((x) => options[Number(x.slice(1))].value);
          this.#emit(ctx.path, !items.length ? undefined : joiner ? items.join(joiner) : items);
        }}>
            <span slot="label">${lbl.name}</span>
            ${options.map((o, i) => optionTemplate(o, i))}
          </sl-select>
    `;
  }

  #scalarList(scalar: ScalarType, ctx: Ctx, value: JsonValue | undefined, lbl: Label): TemplateResult {
    const lines = Array.isArray(value) ? value.map((v) => String(v)).join("\n") : "";
    const numeric = scalar !== ScalarType.STRING && scalar !== ScalarType.BYTES && scalar !== ScalarType.BOOL;
    return html`
      <sl-textarea size="small" rows="3" resize="auto" ?disabled=${this.readOnly}
        help-text=${[lbl.help, "One value per line."].filter(Boolean).join(" ")} value=${lines}
        @sl-change=${(e: Event) => {
          const items = String((e.target as HTMLTextAreaElement).value).split("\n").map((l) => l.trim())
            .filter(Boolean);
          const parsed: JsonValue[] = items.map((i) =>
            scalar === ScalarType.BOOL ? i === "true" : numeric && !INT64.has(scalar) ? Number(i) : i
          );
          this.#emit(ctx.path, parsed.length ? parsed : undefined);
        }}><span slot="label">${lbl.name}</span></sl-textarea>
    `;
  }

  #jsonText(ctx: Ctx, value: JsonValue | undefined, lbl: Label): TemplateResult {
    const help = [lbl.help, "JSON."].filter(Boolean).join(" ");
    return html`
      <sl-textarea size="small" rows="4" resize="auto" class="json-value" ?disabled=${this.readOnly}
        help-text=${help} value=${value === undefined ? "" : JSON.stringify(value, null, 2)}
        @sl-change=${(e: Event) => {
          const target = e.target as HTMLTextAreaElement & { helpText: string };
          const text = target.value.trim();
          if (!text) return this.#emit(ctx.path, undefined);
          try {
            this.#emit(ctx.path, JSON.parse(text));
            target.helpText = help;
            target.classList.remove("has-error");
          } catch (err) {
            target.helpText = `Not valid JSON: ${(err as Error).message}`;
            target.classList.add("has-error");
          }
        }}><span slot="label">${lbl.name}</span></sl-textarea>
    `;
  }

  #message(message: DescMessage, ctx: Ctx, value: JsonValue | undefined, label: string): TemplateResult {
    const shownBefore = this.#shown.size;
    const fields = this.#fields(message, ctx, value);
    const problems = this.#shown.size > shownBefore;
    const set = value && typeof value === "object" && !Array.isArray(value) ? Object.keys(value).length : 0;
    return html`
      <sl-details class="nested-message" summary=${`${label}: ${set} of ${fields.length} set`}
        ?open=${set > 0 || problems || this.filter.trim() !== ""}>
        <div class="nested">${fields}</div>
      </sl-details>
    `;
  }

  #messageList(message: DescMessage, ctx: Ctx, value: JsonValue | undefined): TemplateResult {
    const items = Array.isArray(value) ? value : [];
    // "PolkitRule" in a Polkit policy reads as "Rule".
    const typePrefix = this.schema.name.replace(/Policy$/, "");
    const itemLabel =
      humanize(message.name.startsWith(typePrefix) ? message.name.slice(typePrefix.length) : message.name) ||
      "Item";
    return html`
      <div class="message-list">
        ${items.map((item, i) => {
          const itemCtx: Ctx = {
            path: [...ctx.path, i],
            names: [...ctx.names, { json: i, proto: i }],
            rule: `${ctx.rule}[]`,
          };
          const fields = this.#fields(message, itemCtx, item);
          return html`<div class="list-item card">
            <div>
              <strong>${itemLabel} ${i + 1}</strong>
              <div class="nested">${fields}</div>
              ${this.#errors(itemCtx, true)}
            </div>
            ${
            this.readOnly ? nothing : html`
              <sl-icon-button name="trash" label=${`Remove ${itemLabel} ${i + 1}`}
                @click=${() => this.#emit([...ctx.path, i], undefined)}></sl-icon-button>
            `
          }
          </div>`;
        })}
        ${this.readOnly ? nothing : html`
          <sl-button size="small" class="add-item"
            @click=${() => this.#emit([...ctx.path, items.length], {})}>
                    <sl-icon slot="prefix" name="plus-lg"></sl-icon>Add ${itemLabel.toLowerCase()}</sl-button>
        `}
      </div>
    `;
  }

  #map(field: DescField & { fieldKind: "map" }, ctx: Ctx, value: JsonValue | undefined): TemplateResult {
    const entries = value && typeof value === "object" && !Array.isArray(value) ? Object.entries(value) : [];
    const rename = (from: string, to: string) => {
      const trimmed = to.trim();
      if (!trimmed || trimmed === from || !value || typeof value !== "object" || Array.isArray(value)) return;
      const next: JsonObject = {};
      for (const [k, v] of Object.entries(value)) next[k === from ? trimmed : k] = v;
      this.#emit(ctx.path, next);
    };
    const entryCtx = (key: string): Ctx => ({
      path: [...ctx.path, key],
      names: [...ctx.names, { json: key, proto: key }],
      rule: `${ctx.rule}.*`,
    });
    const valueControl = (c: Ctx, v: JsonValue): TemplateResult => {
      if (field.mapKind === "message") {
        if (WKT_JSON.has(field.message.typeName)) return this.#jsonText(c, v, { name: "Value" });
        return html`<div class="nested">${this.#fields(field.message, c, v)}</div>`;
      }
      if (field.mapKind === "enum") {
        return this.#choice(c, v, { name: "Value", options: enumChoices(field.enum) });
      }
      return this.#scalar(field.scalar, c, v, { name: "Value" });
    };
    return html`
      <div class="map-entries">
        ${entries.map(([k, v]) => {
          const c = entryCtx(k);
          const control = valueControl(c, v);
          return html`<div class="list-item card" data-entry=${k}>
            <div>
              <sl-input size="small" label="Key" value=${k} ?disabled=${this.readOnly}
                @sl-change=${(e: Event) =>
            rename(k, String((e.target as HTMLInputElement).value))}></sl-input>
              ${control}
              ${this.#errors(c, true)}
            </div>
            ${
            this.readOnly ? nothing : html`
              <sl-icon-button name="trash" label=${`Remove ${k}`}
                @click=${() => this.#emit([...ctx.path, k], undefined)}></sl-icon-button>
            `
          }
          </div>`;
        })}
        ${this.readOnly ? nothing : html`
          <sl-button size="small" class="add-item"
            @click=${() => {
              let key = "new-key";
              for (let n = 2; entries.some(([k]) => k === key); n++) key = `new-key-${n}`;
              const initial: JsonValue = field.mapKind === "message"
                ? (WKT_JSON.has(field.message.typeName) ? null : {})
                : field.mapKind === "scalar" && field.scalar === ScalarType.BOOL
                ? false
                : field.mapKind === "scalar" && field.scalar !== ScalarType.STRING
                ? 0
                : "";
              this.#emit([...ctx.path, key], initial);
            }}><sl-icon slot="prefix" name="plus-lg"></sl-icon>Add entry</sl-button>
        `}
      </div>
    `;
  }
}

/**
 * Where below the field a problem is, for a message shown on the field's row: `Item 3` for `[2]` of a list
 * (the third line of a one-value-per-line list), `URL` for `.URL`; empty at the field itself.
 */
function relativePlace(field: string, paths: string[]): string {
  const base = paths.find((p) => field === p || field.startsWith(`${p}.`) || field.startsWith(`${p}[`));
  const rest = base === undefined ? "" : field.slice(base.length);
  const item = /^\[(\d+)\]$/.exec(rest);
  if (item) return `Item ${Number(item[1]) + 1}`;
  return rest.replace(/^\./, "");
}

/** True when `value` is absent or a list whose every item is one of `options` (a multiple choice can show it). */
function fitsOptions(value: JsonValue | undefined, options: readonly ChoiceOption[]): boolean {
  if (value === undefined) return true;
  return Array.isArray(value) && value.every((v) => options.some((o) => o.value === v));
}

/** An option of a choice; a catalogue label is followed by the value written to the file. */
function optionTemplate(o: ChoiceOption, i: number): TemplateResult {
  return html`<sl-option value=${`o${i}`}>${o.label}${
    !o.internal && String(o.value) !== o.label && !o.label.startsWith(`${o.value}`)
      ? html`<code slot="suffix" class="option-value">${o.value}</code>`
      : nothing
  }</sl-option>`;
}

customElements.define("svc-schema-form", SvcSchemaForm);
