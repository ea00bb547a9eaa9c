/**
 * `<svc-schema-form>`: a form generated from a policy type's protobuf-es message descriptor. It walks
 * `schema.fields` and edits the protojson value (json_name keys) the server stores:
 *
 * - booleans: set / not set / true / false (an explicit false is a managed value);
 * - strings and numbers: inputs, or a choice when the type's rules or the field's .proto comment list the
 *   allowed values;
 * - enums: a choice of the enum's values; repeated scalars: one value per line;
 * - messages: nested sections; repeated messages: a list with add and remove; maps: key/value rows;
 * - `google.protobuf.Value`/`ListValue`/`Struct`: JSON text.
 *
 * Top-level settings are grouped as in the .proto file and searchable. Every change fires `value-change`
 * with the new value; problems (`issues`, from the shared validator) are shown next to their field.
 */
import { html, LitElement, nothing, type TemplateResult } from "lit";
import { type DescField, type DescMessage, ScalarType } from "@bufbuild/protobuf";
import type { ValidationIssue } from "../../../shared/policy_types/mod.ts";
import type { JsonObject, JsonValue } from "../content.ts";
import { humanize, isEmptyValue, optionsFromDoc, type Segment, setIn } from "./form_model.ts";
import type { FormHints } from "./spec.ts";
import docsJson from "./proto_docs.gen.json" with { type: "json" };

type Docs = Record<string, { doc?: string; fields: Record<string, { doc?: string; group?: string }> }>;
const DOCS = docsJson as Docs;

const WKT_JSON = new Set(["google.protobuf.Value", "google.protobuf.ListValue", "google.protobuf.Struct"]);
const INT64 = new Set([
  ScalarType.INT64,
  ScalarType.UINT64,
  ScalarType.SINT64,
  ScalarType.FIXED64,
  ScalarType.SFIXED64,
]);

function docOf(message: DescMessage, field: DescField): { doc?: string; group?: string } {
  return DOCS[message.typeName]?.fields[field.name] ?? {};
}

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

/** A control's visible label and its help (the field's .proto comment). */
interface Label {
  name: TemplateResult | string;
  doc?: string;
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
  /** Rule path for enum hints: `Bookmarks[].Placement`, `Preferences.*.Status`. */
  rule: string;
}

class SvcSchemaForm extends LitElement {
  static override properties = {
    schema: { attribute: false },
    value: { attribute: false },
    issues: { attribute: false },
    hints: { attribute: false },
    readOnly: { type: Boolean, attribute: "read-only" },
    filter: { state: true },
    onlyConfigured: { state: true },
  };
  declare schema: DescMessage;
  declare value: JsonObject;
  declare issues: ValidationIssue[];
  declare hints: FormHints;
  declare readOnly: boolean;
  declare filter: string;
  declare onlyConfigured: boolean;
  #ids = 0;

  constructor() {
    super();
    this.value = {};
    this.issues = [];
    this.hints = {};
    this.readOnly = false;
    this.filter = "";
    this.onlyConfigured = false;
  }

  protected override createRenderRoot(): HTMLElement {
    return this;
  }

  #emit(path: Segment[], v: JsonValue | undefined): void {
    const next = setIn(this.value, path, v);
    this.dispatchEvent(new CustomEvent<JsonObject>("value-change", { detail: next, bubbles: true }));
  }

  #issuesAt(ctx: Ctx, deep = false): ValidationIssue[] {
    const [json, proto] = pathStrings(ctx.names);
    return this.issues.filter((i) => {
      const f = i.field;
      if (f === json || f === proto) return true;
      if (!deep) return false;
      return [json, proto].some((p) => f.startsWith(`${p}.`) || f.startsWith(`${p}[`));
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
    const root: Ctx = { path: [], names: [], rule: "" };
    const filter = this.filter.trim().toLowerCase();
    const fields = this.schema.fields.filter((f) => {
      const configured = !isEmptyValue(this.value[f.jsonName]);
      if (this.onlyConfigured && !configured) return false;
      if (!filter) return true;
      const d = docOf(this.schema, f);
      return [f.jsonName, f.name, humanize(f.jsonName), d.doc ?? "", d.group ?? ""].some((t) =>
        t.toLowerCase().includes(filter)
      );
    });
    const groups = new Map<string, DescField[]>();
    for (const f of fields) {
      const group = f.jsonName === this.hints.escapeHatch
        ? "Other policy keys"
        : docOf(this.schema, f).group ?? "Settings";
      if (!groups.has(group)) groups.set(group, []);
      groups.get(group)!.push(f);
    }
    const configuredCount = this.schema.fields.filter((f) => !isEmptyValue(this.value[f.jsonName])).length;
    const many = this.schema.fields.length > 8;
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
                      Only configured (${configuredCount})</sl-switch>
          </div>
        `
        : nothing}
      ${fields.length === 0 ? html`<p class="muted">No setting matches.</p>` : nothing}
      ${[...groups.entries()].map(([group, list]) => {
        const body = list.map((f) => this.#field(this.schema, f, root));
        if (groups.size === 1 && !many) return body;
        const set = list.filter((f) => !isEmptyValue(this.value[f.jsonName])).length;
        return html`
          <sl-details class="setting-group" summary=${`${group} (${set} of ${list.length} set)`}
            ?open=${!!filter || set > 0 || groups.size === 1}>${body}</sl-details>
        `;
      })}
    `;
  }

  /** One field of `message` at `parent`: its control (labelled, with the .proto comment as help) and problems. */
  #field(message: DescMessage, field: DescField, parent: Ctx): TemplateResult {
    const ctx = this.#child(parent, field);
    const value = this.#get(ctx.path);
    const d = docOf(message, field);
    const leaf = isLeaf(field);
    const problems = this.#issuesAt(
      ctx,
      !leaf || field.fieldKind === "list" ||
        (field.fieldKind === "message" && WKT_JSON.has(field.message.typeName)),
    );
    const configured = !isEmptyValue(value);
    const label = humanize(field.jsonName);
    const name =
      html`<span class="field-label">${label}<code class="field-key">${field.jsonName}</code></span>`;
    const clear = configured && !this.readOnly
      ? html`
        <sl-icon-button name="x-circle" label=${`Clear ${label}`} @click=${() =>
          this.#emit(ctx.path, undefined)}></sl-icon-button>
      `
      : nothing;
    const errors = problems.map((p) => html`<div class="field-error" role="alert">${p.message}</div>`);
    if (leaf) {
      return html`
        <div class="field-row leaf ${configured ? "configured" : ""}" data-field=${pathStrings(ctx.names)[0]}>
          <div class="field-main">${this.#control(field, ctx, value, { name, doc: d.doc })}${errors}</div>
          <div>${clear}</div>
        </div>
      `;
    }
    return html`
      <div class="field-row ${configured ? "configured" : ""}" data-field=${pathStrings(ctx.names)[0]}>
        <div class="field-name">
          ${name}
          ${d.doc ? html`<span class="field-doc">${d.doc}</span>` : nothing}
        </div>
        <div class="field-control">${this.#control(field, ctx, value, {
          name: label,
          doc: d.doc,
        })}${errors}</div>
        <div>${clear}</div>
      </div>
    `;
  }

  #control(field: DescField, ctx: Ctx, value: JsonValue | undefined, lbl: Label): TemplateResult {
    switch (field.fieldKind) {
      case "scalar":
        return this.#scalar(field.scalar, ctx, value, lbl);
      case "enum":
        return this.#choice(
          ctx,
          value,
          lbl,
          field.enum.values.map((v) => ({
            value: v.name,
            label: humanize(v.name.replace(/^[A-Z0-9]+_/, "")),
          })),
        );
      case "message":
        if (WKT_JSON.has(field.message.typeName)) return this.#jsonText(ctx, value, lbl);
        return this.#message(field.message, ctx, value, String(lbl.name));
      case "list":
        if (field.listKind === "message") return this.#messageList(field.message, ctx, value);
        if (field.listKind === "enum") {
          return this.#multiChoice(ctx, value, lbl, field.enum.values.map((v) => v.name));
        }
        return this.#scalarList(field.scalar, ctx, value, lbl);
      case "map":
        return this.#map(field, ctx, value);
    }
  }

  #scalar(scalar: ScalarType, ctx: Ctx, value: JsonValue | undefined, lbl: Label): TemplateResult {
    if (scalar === ScalarType.BOOL) {
      return html`
        <sl-select size="small" placeholder="Not managed" clearable hoist ?disabled=${this.readOnly}
          help-text=${lbl.doc ?? ""} value=${value === undefined ? "" : String(value)}
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
    const ruleOptions = this.hints.enums?.[ctx.rule];
    const options = ruleOptions
      ? ruleOptions.map((v) => ({ value: v, label: v === "" ? "(empty)" : String(v) }))
      : optionsFromDoc(lbl.doc);
    if (options.length) return this.#choice(ctx, value, lbl, options, scalar !== ScalarType.STRING);
    const numeric = scalar !== ScalarType.STRING && scalar !== ScalarType.BYTES;
    return html`
      <sl-input size="small" ?disabled=${this.readOnly} type=${numeric ? "number" : "text"}
        help-text=${lbl.doc ?? ""} value=${value === undefined || value === null
          ? ""
          : String(value)} placeholder="Not managed"
        @sl-change=${(e: Event) => {
          const raw = String((e.target as HTMLInputElement).value);
          if (raw === "") return this.#emit(ctx.path, undefined);
          if (!numeric) return this.#emit(ctx.path, raw);
          this.#emit(ctx.path, INT64.has(scalar) ? raw : Number(raw));
        }}><span slot="label">${lbl.name}</span></sl-input>
    `;
  }

  #choice(
    ctx: Ctx,
    value: JsonValue | undefined,
    lbl: Label,
    options: Array<{ value: string | number; label: string }>,
    numeric = false,
  ): TemplateResult {
    // sl-option values cannot contain spaces or be empty, so options are addressed by index.
    const index = options.findIndex((o) => o.value === value);
    return html`
      <sl-select size="small" placeholder="Not managed" clearable hoist ?disabled=${this.readOnly}
        help-text=${lbl.doc ?? ""} value=${index >= 0 ? `o${index}` : ""}
        @sl-change=${(e: Event) => {
          const v = String((e.target as HTMLSelectElement).value);
          const chosen = v === "" ? undefined : options[Number(v.slice(1))]?.value;
          this.#emit(ctx.path, chosen === undefined ? undefined : numeric ? Number(chosen) : chosen);
        }}>
            <span slot="label">${lbl.name}</span>
            ${options.map((o, i) => html`<sl-option value=${`o${i}`}>${o.label}</sl-option>`)}
          </sl-select>
    `;
  }

  #multiChoice(ctx: Ctx, value: JsonValue | undefined, lbl: Label, names: string[]): TemplateResult {
    const chosen = Array.isArray(value) ? value.map(String) : [];
    return html`
      <sl-select size="small" multiple clearable hoist placeholder="None" ?disabled=${this.readOnly}
        help-text=${lbl.doc ?? ""} .value=${chosen.map((c) => `o${names.indexOf(c)}`)}
        @sl-change=${(e: Event) => {
          const v = (e.target as unknown as { value: string[] }).value;
          this.#emit(ctx.path, v.length ? v.map((x) => names[Number(x.slice(1))]) : undefined);
        }}>
            <span slot="label">${lbl.name}</span>
            ${names.map((n, i) => html`<sl-option value=${`o${i}`}>${n}</sl-option>`)}
          </sl-select>
    `;
  }

  #scalarList(scalar: ScalarType, ctx: Ctx, value: JsonValue | undefined, lbl: Label): TemplateResult {
    const lines = Array.isArray(value) ? value.map((v) => String(v)).join("\n") : "";
    const numeric = scalar !== ScalarType.STRING && scalar !== ScalarType.BYTES && scalar !== ScalarType.BOOL;
    return html`
      <sl-textarea size="small" rows="3" resize="auto" ?disabled=${this.readOnly}
        help-text=${[lbl.doc, "One value per line."].filter(Boolean).join(" ")} value=${lines}
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
    const help = [lbl.doc, "JSON."].filter(Boolean).join(" ");
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
    const set = value && typeof value === "object" && !Array.isArray(value) ? Object.keys(value).length : 0;
    return html`
      <sl-details class="nested-message" summary=${`${label}: ${set} of ${message.fields.length} set`}
        ?open=${set > 0}>
        <div class="nested">${message.fields.map((f) => this.#field(message, f, ctx))}</div>
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
        ${items.map((_, i) => {
          const itemCtx: Ctx = {
            path: [...ctx.path, i],
            names: [...ctx.names, { json: i, proto: i }],
            rule: `${ctx.rule}[]`,
          };
          return html`<div class="list-item card">
            <div>
              <strong>${itemLabel} ${i + 1}</strong>
              <div class="nested">${message.fields.map((f) => this.#field(message, f, itemCtx))}</div>
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
    const valueControl = (key: string, v: JsonValue): TemplateResult => {
      const c = entryCtx(key);
      if (field.mapKind === "message") {
        if (WKT_JSON.has(field.message.typeName)) return this.#jsonText(c, v, { name: "Value" });
        return html`<div class="nested">${
          field.message.fields.map((f) => this.#field(field.message, f, c))
        }</div>`;
      }
      if (field.mapKind === "enum") {
        return this.#choice(
          c,
          v,
          { name: "Value" },
          field.enum.values.map((x) => ({ value: x.name, label: x.name })),
        );
      }
      return this.#scalar(field.scalar, c, v, { name: "Value" });
    };
    return html`
      <div class="map-entries">
        ${entries.map(([k, v]) =>
          html`<div class="list-item card">
            <div>
              <sl-input size="small" label="Key" value=${k} ?disabled=${this.readOnly}
                @sl-change=${(e: Event) =>
            rename(k, String((e.target as HTMLInputElement).value))}></sl-input>
              ${valueControl(k, v)}
            </div>
            ${
            this.readOnly ? nothing : html`
              <sl-icon-button name="trash" label=${`Remove ${k}`}
                @click=${() => this.#emit([...ctx.path, k], undefined)}></sl-icon-button>
            `
          }
          </div>`
        )}
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

customElements.define("svc-schema-form", SvcSchemaForm);
