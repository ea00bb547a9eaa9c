/**
 * `<svc-dconf-form>`, the Dconf policy editor's own form (see `editors/dconf.ts`). Keys are picked from the GSettings catalogue
 * (`<svc-gsettings-picker>`), and each key gets the control its type calls for: a switch for booleans, a
 * number with the schema's range, a choice list for enums and `<choices>`, several choices for flags, one
 * line per item for string lists, a text box for strings. The default is shown, and each key can be locked.
 * A key the catalogue does not know is edited as GVariant text, checked as you type with the same parser the
 * server and the agent use (`shared/gvariant.ts`). The value emitted is the policy content with proto field
 * names.
 */
import { html, nothing, type TemplateResult } from "lit";
import {
  canonicalGVariant,
  formatGVariant,
  type GValue,
  GVariantError,
  gvariantProblem,
  gvariantSyntaxProblem,
  parseGVariant,
} from "../../../shared/gvariant.ts";
import type { ValidationIssue } from "../../../shared/policy_types/mod.ts";
import type { JsonObject } from "../content.ts";
import { type CatalogueKey, type CatalogueSchema, catalogueSchema } from "./gsettings_picker.ts";
import { PolicyFormElement } from "./policy_form_element.ts";
import { stateProperties } from "./light_element.ts";

/** One entry as the form keeps it. */
interface Entry {
  schema_id: string;
  path: string;
  key: string;
  value: string;
  lock: boolean;
}

const NUMERIC = new Set(["y", "n", "q", "i", "u", "x", "t", "h", "d"]);

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

/** Reads content in either field spelling (json_name or proto name). */
function entriesOf(value: JsonObject): Entry[] {
  const list = Array.isArray(value.entries) ? value.entries : [];
  return list.map((raw) => {
    const e = (raw ?? {}) as Record<string, unknown>;
    return {
      schema_id: str(e.schema_id ?? e.schemaId),
      path: str(e.path),
      key: str(e.key),
      value: str(e.value),
      lock: e.lock === true,
    };
  });
}

function contentOf(entries: Entry[], dbName: string, profile: string): JsonObject {
  const out: JsonObject = {
    entries: entries.map((e) => ({
      schema_id: e.schema_id,
      ...(e.path ? { path: e.path } : {}),
      key: e.key,
      value: e.value,
      ...(e.lock ? { lock: true } : {}),
    })),
  };
  if (dbName) out.db_name = dbName;
  if (profile) out.profile = profile;
  return out;
}

/** The value as a JS value for a control, or undefined when the text does not fit the key. */
function typed(text: string, key: CatalogueKey): GValue | undefined {
  try {
    return parseGVariant(text, key.type);
  } catch {
    return undefined;
  }
}

/**
 * The problem with GVariant text for a key the catalogue does not know, by the shared parser: the value is
 * typed as GLib infers it, so `uint32 -5` (out of range) and `[1, 'a']` (mixed array) are refused as one
 * types. A value whose type cannot be told without the key (`[]`, `nothing`) is accepted: the agent types it
 * against the schema installed on the node.
 */
function untypedProblem(text: string): string | undefined {
  const syntax = gvariantSyntaxProblem(text);
  if (syntax) return syntax;
  try {
    parseGVariant(text);
    return undefined;
  } catch (err) {
    if (!(err instanceof GVariantError)) throw err;
    return err.message.startsWith("cannot tell the type")
      ? undefined
      : `is not a valid GVariant value: ${err.message}`;
  }
}

class SvcDconfForm extends PolicyFormElement {
  static override properties = {
    ...stateProperties("picking", "schemas"),
  };
  declare picking: boolean;
  declare schemas: Map<string, CatalogueSchema | null>;

  constructor() {
    super();
    this.picking = false;
    this.schemas = new Map();
  }

  protected override willUpdate(): void {
    for (const e of entriesOf(this.value)) {
      if (e.schema_id && !this.schemas.has(e.schema_id)) this.#load(e.schema_id);
    }
  }

  #load(schemaId: string): void {
    this.schemas.set(schemaId, null);
    void catalogueSchema(schemaId).then((schema) => {
      this.schemas = new Map(this.schemas).set(schemaId, schema ?? null);
    });
  }

  #emit(
    entries: Entry[],
    db = str(this.value.db_name ?? this.value.dbName),
    profile = str(this.value.profile),
  ) {
    this.emitValue(contentOf(entries, db, profile));
  }

  #update(index: number, change: Partial<Entry>): void {
    const entries = entriesOf(this.value);
    entries[index] = { ...entries[index], ...change };
    this.#emit(entries);
  }

  async #onPick(e: CustomEvent<{ schemaId: string; key: string }>): Promise<void> {
    const { schemaId, key } = e.detail;
    this.picking = false;
    const schema = await catalogueSchema(schemaId);
    const info = schema?.keys.find((k) => k.name === key);
    let value = info?.default_value ?? "";
    try {
      if (info) value = canonicalGVariant(value, info.type);
    } catch {
      // The schema's own default text is shown as it is.
    }
    this.#emit([...entriesOf(this.value), { schema_id: schemaId, path: "", key, value, lock: false }]);
  }

  #issuesFor(index: number): ValidationIssue[] {
    const prefix = `entries[${index}]`;
    return this.issues.filter((i) => i.field === prefix || i.field.startsWith(`${prefix}.`));
  }

  #valueControl(entry: Entry, index: number, key: CatalogueKey | undefined): TemplateResult {
    const label = "Value";
    const set = (value: string) => this.#update(index, { value });
    if (key) {
      const current = typed(entry.value, key);
      const nicks = key.enum_values?.map((v) => v.nick) ?? [];
      if (key.type === "b") {
        return html`
          <sl-switch class="dconf-value" ?disabled=${this.readOnly} ?checked=${current?.value === true}
            @sl-change=${(e: Event) => set((e.target as HTMLInputElement).checked ? "true" : "false")}>
                    ${current?.value === true ? "On" : "Off"}</sl-switch>
        `;
      }
      if (key.flags && nicks.length) {
        const chosen = (current?.value as GValue[] | undefined)?.map((v) => String(v.value)) ?? [];
        return html`
          <sl-select class="dconf-value" label=${label} multiple clearable hoist ?disabled=${this.readOnly}
            .value=${chosen} @sl-change=${(e: Event) => {
              const picked = (e.target as unknown as { value: string[] }).value;
              set(formatGVariant({ type: "as", value: picked.map((p) => ({ type: "s", value: p })) }));
            }}>${nicks.map((n) => html`<sl-option value=${n}>${n}</sl-option>`)}</sl-select>
        `;
      }
      const options = nicks.length ? nicks : key.type === "s" ? key.choices ?? [] : [];
      if (options.length) {
        return html`
          <sl-select class="dconf-value" label=${label} hoist ?disabled=${this.readOnly}
            .value=${typeof current?.value === "string" ? current.value : ""}
            @sl-change=${(e: Event) =>
              set(formatGVariant({ type: "s", value: String((e.target as HTMLSelectElement).value) }))}>
                    ${options.map((n) => html`<sl-option value=${n}>${n}</sl-option>`)}</sl-select>
        `;
      }
      if (NUMERIC.has(key.type)) {
        const range = key.range_min || key.range_max
          ? ` (${key.range_min || "…"} to ${key.range_max || "…"})`
          : "";
        return html`
          <sl-input class="dconf-value" type="number" label=${`${label}${range}`} ?disabled=${this.readOnly}
            min=${key.range_min || nothing} max=${key.range_max || nothing}
            step=${key.type === "d" ? "any" : "1"}
            .value=${current ? String(current.value) : ""} @sl-change=${(e: Event) => {
              const text = String((e.target as HTMLInputElement).value).trim();
              try {
                set(canonicalGVariant(text, key.type));
              } catch {
                set(text);
              }
            }}></sl-input>
        `;
      }
      if (key.type === "as") {
        const items = (current?.value as GValue[] | undefined)?.map((v) => String(v.value)) ?? [];
        return html`
          <sl-textarea class="dconf-value" label="Values, one per line" rows="3"
            ?disabled=${this.readOnly} .value=${items.join("\n")} @sl-change=${(e: Event) => {
              const lines = String((e.target as HTMLTextAreaElement).value).split("\n").map((l) => l.trim())
                .filter((l) => l);
              set(formatGVariant({ type: "as", value: lines.map((l) => ({ type: "s", value: l })) }));
            }}></sl-textarea>
        `;
      }
      if (key.type === "s") {
        return html`
          <sl-input class="dconf-value" label=${label} ?disabled=${this.readOnly}
            .value=${typeof current?.value === "string" ? current.value : ""}
            @sl-change=${(e: Event) =>
              set(
                formatGVariant({ type: "s", value: String((e.target as HTMLInputElement).value) }),
              )}></sl-input>
        `;
      }
    }
    const problem = entry.value
      ? key ? gvariantProblem(entry.value, key.type) : untypedProblem(entry.value)
      : undefined;
    return html`
      <sl-input class="dconf-value dconf-gvariant ${problem ? "has-error" : ""}"
        label=${`Value (GVariant text${key ? `, type ${key.type}` : ""})`} ?disabled=${this.readOnly}
        placeholder="e.g. true, 'Adwaita', uint32 300, ['a', 'b']" .value=${entry.value}
        help-text=${problem ? `The value ${problem}` : ""}
        @sl-input=${(e: Event) => set(String((e.target as HTMLInputElement).value))}></sl-input>
    `;
  }

  #row(entry: Entry, index: number): TemplateResult {
    const schema = this.schemas.get(entry.schema_id) ?? undefined;
    const key = schema?.keys.find((k) => k.name === entry.key);
    const issues = this.#issuesFor(index);
    return html`
      <fieldset class="dconf-entry" data-index=${index} aria-label=${`${entry.schema_id} ${entry.key}`}>
        <legend><code>${entry.schema_id || "(schema)"}</code> <strong>${entry.key ||
          "(key)"}</strong></legend>
        ${key?.summary ? html`<p>${key.summary}</p>` : nothing}
        ${schema === undefined && entry.schema_id
          ? html`<p class="muted">This schema is not in the catalogue: the value is checked as GVariant text only.</p>`
          : nothing}
        <div class="dconf-fields">
          <sl-input size="small" label="Schema id" ?disabled=${this.readOnly} .value=${entry.schema_id}
            @sl-change=${(e: Event) =>
              this.#update(index, { schema_id: String((e.target as HTMLInputElement).value) })}>
          </sl-input>
          <sl-input size="small" label="Key" ?disabled=${this.readOnly} .value=${entry.key}
            @sl-change=${(e: Event) =>
              this.#update(index, { key: String((e.target as HTMLInputElement).value) })}>
          </sl-input>
          ${schema?.relocatable || entry.path
            ? html`
              <sl-input size="small" label="dconf path (relocatable schema)" ?disabled=${this.readOnly}
                placeholder="/org/gnome/terminal/legacy/profiles:/:abc/" .value=${entry.path}
                @sl-change=${(e: Event) =>
                  this.#update(index, { path: String((e.target as HTMLInputElement).value) })}></sl-input>
            `
            : nothing}
        </div>
        ${this.#valueControl(entry, index, key)}
        ${key ? html`<p class="muted dconf-default">Default: <code>${key.default_value}</code></p>` : nothing}
        <sl-switch class="dconf-lock" ?disabled=${this.readOnly} ?checked=${entry.lock}
          @sl-change=${(e: Event) => this.#update(index, { lock: (e.target as HTMLInputElement).checked })}>
          Lock (users cannot change it)</sl-switch>
        ${this.readOnly ? nothing : html`
          <sl-button size="small" variant="text" class="dconf-remove"
            @click=${() => this.#emit(entriesOf(this.value).filter((_, i) => i !== index))}>Remove</sl-button>
        `}
        ${issues.map((i) => html`<div class="field-error" role="alert">${i.field}: ${i.message}</div>`)}
      </fieldset>
    `;
  }

  override render(): TemplateResult {
    const entries = entriesOf(this.value);
    const db = str(this.value.db_name ?? this.value.dbName);
    const profile = str(this.value.profile);
    return html`
      <div class="dconf-form">
        <div class="dconf-fields">
          <sl-input size="small" label="Database" placeholder="local" ?disabled=${this.readOnly} .value=${db}
            help-text="System database under /etc/dconf/db/ (empty: local)"
            @sl-change=${(e: Event) =>
              this.#emit(entries, String((e.target as HTMLInputElement).value), profile)}>
          </sl-input>
          <sl-input size="small" label="Profile" placeholder="user" ?disabled=${this
            .readOnly} .value=${profile}
            help-text="dconf profile that must list the database (empty: user; gdm for the login screen)"
            @sl-change=${(e: Event) => this.#emit(entries, db, String((e.target as HTMLInputElement).value))}>
          </sl-input>
        </div>
        ${entries.length === 0
          ? html`<p class="muted">No setting yet: add one from the catalogue.</p>`
          : nothing}
        ${entries.map((e, i) => this.#row(e, i))}
        ${this.readOnly ? nothing : html`
          <div class="toolbar">
            <sl-button class="dconf-add" size="small" @click=${() => this.picking = !this.picking}>
              ${this.picking ? "Close the catalogue" : "Add a setting"}</sl-button>
            <sl-button class="dconf-add-free" size="small" variant="text"
              @click=${() =>
                this.#emit([...entries, { schema_id: "", path: "", key: "", value: "", lock: false }])}>
              Add a key the catalogue does not know</sl-button>
          </div>
          ${this.picking
            ? html`<svc-gsettings-picker @gsettings-pick=${(
              e: CustomEvent<{ schemaId: string; key: string }>,
            ) => void this.#onPick(e)}></svc-gsettings-picker>`
            : nothing}
        `}
      </div>
    `;
  }
}

customElements.define("svc-dconf-form", SvcDconfForm);
