/**
 * `/policies/new` and `/policies/:policyId/edit`: the policy editor. Details (name, description, type), the
 * typed form generated from the shared registry's content message, and a JSON view of the same value.
 * Every change is validated in the browser by the same `validatePolicyContent` the server runs, and
 * problems appear next to their field. Drafts are edited directly. A released policy is changed through a
 * revision: "Edit" starts one, the page then edits the revision and shows its diff against the released
 * version, which nodes keep receiving until "Release revision" (or "Discard revision"). Archived policies are
 * read-only. "Duplicate" copies any policy into a new draft.
 */
import { html, nothing, type TemplateResult } from "lit";
import { html as staticHtml, unsafeStatic } from "lit/static-html.js";
import {
  getPolicyType,
  listPolicyTypes,
  validatePolicyContent,
  type ValidationIssue,
} from "../../../shared/policy_types/mod.ts";
import { api, ApiError } from "../api.ts";
import { session } from "../session.ts";
import { navigate } from "../router.ts";
import { PageElement } from "../components/page.ts";
import {
  confirmAction,
  errorAlert,
  fieldError,
  formatDate,
  notify,
  notifyError,
  statusBadge,
} from "../components/ui.ts";
import { lifecycleActions } from "../lifecycle.ts";
import { editorFor, type EditorSpec } from "../editors/mod.ts";
import { contentToValue, type JsonObject } from "../content.ts";
import "../editors/schema_form.ts";
// Defines the types' own form elements (an editor's formTag), found by `deno task proto`.
import "../editors/forms.gen.ts";
import { askLockoutReason } from "../components/session_lockout_dialog.ts";
import docsJson from "../editors/proto_docs.gen.json" with { type: "json" };
import type { Policy, PolicyRevision } from "../types.ts";
import { renderContentDiff } from "../components/content_diff.ts";
import "../components/policy_rollout.ts";
import "../components/binding_dialog.ts";
import { policyTypeInfo } from "../editors/type_info.ts";
import { labelIssues } from "../editors/enum_labels.ts";
import { roleAdvice } from "../permission_text.ts";

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
function typeSummary(type: string): string[] {
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

class SvcPolicyEditorPage extends PageElement {
  static override properties = {
    ...PageElement.properties,
    policy: { state: true },
    type: { state: true },
    value: { state: true },
    issues: { state: true },
    warning: { state: true },
    saveError: { state: true },
    dirty: { state: true },
    view: { state: true },
    jsonError: { state: true },
    saving: { state: true },
    revision: { state: true },
    releasedValue: { state: true },
    contentTouched: { state: true },
    assigning: { state: true },
  };
  declare policy: Policy | undefined;
  declare type: string;
  declare value: JsonObject;
  declare issues: ValidationIssue[];
  declare warning: string | undefined;
  declare saveError: unknown;
  declare dirty: boolean;
  declare view: "form" | "json";
  declare jsonError: string | undefined;
  declare saving: boolean;
  /** The pending revision of a released policy; the page edits it instead of the policy. */
  declare revision: PolicyRevision | undefined;
  /** The released content, for the diff while a revision is edited. */
  declare releasedValue: JsonObject;
  /** The settings were changed since the page opened (a new policy shows no problems before that). */
  declare contentTouched: boolean;
  /** The "Assign to groups" dialog is open. */
  declare assigning: boolean;

  override pageTitle = "Policy";

  constructor() {
    super();
    this.type = "";
    this.value = {};
    this.issues = [];
    this.dirty = false;
    this.view = "form";
    this.saving = false;
    this.releasedValue = {};
    this.contentTouched = false;
    this.assigning = false;
  }

  override connectedCallback(): void {
    globalThis.addEventListener("beforeunload", this.#beforeUnload);
    super.connectedCallback();
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    globalThis.removeEventListener("beforeunload", this.#beforeUnload);
  }

  #beforeUnload = (e: BeforeUnloadEvent) => {
    if (this.dirty) e.preventDefault();
  };

  get #isNew(): boolean {
    return this.route?.name === "policy-new";
  }

  get #editable(): boolean {
    if (this.#isNew) return session.can("policy:create");
    if (!session.can("policy:edit")) return false;
    return this.policy?.state === "draft" || (this.policy?.state === "released" && !!this.revision);
  }

  protected override async load(): Promise<void> {
    if (this.#isNew) {
      document.title = "New policy · svc";
      const requested = this.route.query.get("type") ?? "";
      this.#setType(getPolicyType(requested) ? requested : "");
      return;
    }
    const policy = await api.get<Policy>(`/policies/all/${encodeURIComponent(this.route.params.policyId)}`);
    const revision = policy.state === "released" && policy.revision_pending
      ? await api.get<PolicyRevision>(`/policies/all/${policy.id}/revision`).catch((err) => {
        if (err instanceof ApiError && err.status === 404) return undefined;
        throw err;
      })
      : undefined;
    this.policy = policy;
    this.revision = revision;
    document.title = `${policy.name} · Policies · svc`;
    this.type = policy.type;
    const released = contentToValue(policy.type, policy.content ?? "");
    this.releasedValue = released.value;
    const { value, warning } = revision ? contentToValue(policy.type, revision.content) : released;
    this.value = value;
    this.warning = warning;
    this.issues = validate(policy.type, value);
    this.dirty = false;
  }

  #setType(type: string): void {
    this.type = type;
    this.contentTouched = false;
    this.value = {};
    this.issues = type ? validate(type, {}) : [];
  }

  #onValue = (e: CustomEvent<JsonObject>) => {
    this.contentTouched = true;
    this.value = e.detail;
    this.issues = validate(this.type, this.value);
    this.dirty = true;
    this.jsonError = undefined;
  };

  #onJson(text: string): void {
    try {
      const parsed = JSON.parse(text);
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        this.jsonError = "The content must be a JSON object ({ … }).";
        return;
      }
      this.contentTouched = true;
      this.value = parsed;
      this.issues = validate(this.type, parsed);
      this.dirty = true;
      this.jsonError = undefined;
    } catch (err) {
      this.jsonError = `Not valid JSON: ${(err as Error).message}`;
    }
  }

  #input(name: string): string {
    return String(
      (this.querySelector(`.policy-details [name=${name}]`) as HTMLInputElement | null)?.value ?? "",
    );
  }

  async #save(): Promise<void> {
    this.saveError = undefined;
    const name = this.#input("name").trim();
    const description = this.#input("description");
    const content = JSON.stringify(this.value);
    this.saving = true;
    try {
      if (this.#isNew) {
        const created = await api.post<Policy>("/policies/all", {
          name,
          description,
          type: this.type,
          content,
        });
        this.dirty = false;
        notify(`Draft ${created.name} created`, "success");
        navigate(`/policies/${created.id}/edit`, { replace: true });
      } else if (this.revision) {
        this.revision = await api.put<PolicyRevision>(`/policies/all/${this.policy!.id}/revision`, {
          description,
          content,
        });
        this.dirty = false;
        notify("Revision saved; nodes keep the released version until you release it", "success");
        await this.reload();
      } else {
        this.policy = await api.put<Policy>(`/policies/all/${this.policy!.id}`, {
          name,
          description,
          content,
          version: this.policy!.version,
        });
        this.dirty = false;
        notify(`Saved as version ${this.policy.version}`, "success");
        await this.reload();
      }
    } catch (err) {
      this.saveError = err;
      if (err instanceof ApiError) {
        // Content problems come back as `content.<path>`; show them in the form like local ones.
        const content = err.fields.filter((f) => f.field === "content" || f.field.startsWith("content."));
        if (content.length) {
          this.issues = labelIssues(
            this.type,
            content.map((f) => ({ field: f.field.replace(/^content\.?/, ""), message: f.message })),
          );
        }
      }
    } finally {
      this.saving = false;
    }
  }

  async #changeState(target: "released" | "archived" | "draft", label: string): Promise<void> {
    const p = this.policy!;
    if (this.dirty) {
      notify("Save or discard your changes first.", "warning");
      return;
    }
    // A revision only makes sense on a released policy: leaving "released" discards it, said up front, so it
    // is never stranded on an archived or draft policy (where it could not be released).
    const dropsRevision = target !== "released" && !!p.revision_pending;
    const message = target === "released"
      ? "The policy becomes read-only. Nodes receive it once an enabled binding links it to their group."
      : target === "archived"
      ? "Archived policies stop reaching nodes."
      : "The policy becomes editable again and reaches no node while it is a draft.";
    const ok = await confirmAction({
      title: `${label}: ${p.name}`,
      message: dropsRevision
        ? html`${message} <strong class="drops-revision">The revision in progress is discarded; version
          ${p.version} is kept as it is.</strong>`
        : message,
      confirmLabel: dropsRevision ? `Discard revision and ${label.toLowerCase()}` : label,
      danger: dropsRevision,
    });
    if (!ok) return;
    let body: { state: string; lockout_reason?: string } = { state: target };
    for (;;) {
      try {
        await api.put(`/policies/all/${p.id}/state`, body);
        if (dropsRevision) {
          await api.delete(`/policies/all/${p.id}/revision`).catch((err) => {
            if (!(err instanceof ApiError && err.status === 404)) throw err;
          });
        }
        notify(`${p.name}: ${label.toLowerCase()} done`, "success");
        await this.reload();
        return;
      } catch (err) {
        // The SessionAccess lockout guard lets a release through with a reason (audited).
        const reason = body.lockout_reason ? undefined : await askLockoutReason(err);
        if (!reason) return notifyError(err);
        body = { ...body, lockout_reason: reason };
      }
    }
  }

  /** "Edit" on a released policy: starts a revision from the released content. */
  async #startRevision(): Promise<void> {
    try {
      await api.put(`/policies/all/${this.policy!.id}/revision`, {});
      notify("Revision started; nodes keep the released version until you release it", "success");
      await this.reload();
    } catch (err) {
      notifyError(err);
    }
  }

  async #releaseRevision(): Promise<void> {
    const p = this.policy!;
    if (this.dirty) {
      notify("Save or discard your changes first.", "warning");
      return;
    }
    const ok = await confirmAction({
      title: `Release revision: ${p.name}`,
      message: `Version ${p.version + 1} replaces version ${p.version} on every node that receives ${p.name}${
        p.enabled_bindings_count
          ? ` (through ${p.enabled_bindings_count} enabled binding${
            p.enabled_bindings_count === 1 ? "" : "s"
          })`
          : ""
      }. Nodes keep the current settings until they apply the new ones.`,
      confirmLabel: "Release revision",
    });
    if (!ok) return;
    let body: { lockout_reason?: string } = {};
    for (;;) {
      try {
        const released = await api.post<Policy>(`/policies/all/${p.id}/revision/release`, body);
        notify(`${p.name}: version ${released.version} released`, "success");
        await this.reload();
        return;
      } catch (err) {
        const reason = body.lockout_reason ? undefined : await askLockoutReason(err);
        if (!reason) return notifyError(err);
        body = { lockout_reason: reason };
      }
    }
  }

  async #discardRevision(): Promise<void> {
    const p = this.policy!;
    const ok = await confirmAction({
      title: `Discard revision: ${p.name}`,
      message: `The revision's changes are thrown away. Version ${p.version} stays as it is.`,
      confirmLabel: "Discard revision",
      danger: true,
    });
    if (!ok) return;
    try {
      await api.delete(`/policies/all/${p.id}/revision`);
      this.dirty = false;
      notify("Revision discarded", "success");
      await this.reload();
    } catch (err) {
      notifyError(err);
    }
  }

  async #duplicate(): Promise<void> {
    if (this.dirty) {
      notify("Save or discard your changes first.", "warning");
      return;
    }
    try {
      const copy = await api.post<Policy>(`/policies/all/${this.policy!.id}/duplicate`, {});
      notify(`Draft ${copy.name} created`, "success");
      navigate(`/policies/${copy.id}/edit`);
    } catch (err) {
      notifyError(err);
    }
  }

  /** Changes the page has not saved: the shell asks before a link leaves them behind. */
  override hasUnsavedChanges(): boolean {
    return this.dirty && this.#editable;
  }

  /** `/policies/new` for someone who may not create: why, and who may, instead of a form they cannot use. */
  #renderCannotCreate(): TemplateResult {
    return html`
      <nav aria-label="Breadcrumb" class="muted"><a href="/policies">Policies</a> / New policy</nav>
      <header class="page-header">
        <div>
          <h1>New policy</h1>
        </div>
      </header>
      <sl-alert variant="primary" open class="read-only-note">
        <sl-icon slot="icon" name="lock"></sl-icon>
        Your roles let you read policies but not create them. ${roleAdvice(["policy:create"])}
      </sl-alert>
      <p><a href="/policies">Back to the policies</a></p>
    `;
  }

  override render() {
    if (this.#isNew && !session.can("policy:create")) return this.#renderCannotCreate();
    if (!this.#isNew && !this.policy) {
      return html`${this.renderLoadError()}${this.loadError ? nothing : html`<sl-spinner></sl-spinner>`}`;
    }
    const p = this.policy;
    const editable = this.#editable;
    const title = this.#isNew ? "New policy" : p!.name;
    return html`
      <nav aria-label="Breadcrumb" class="muted"><a href="/policies">Policies</a> / ${title}</nav>
      <header class="page-header">
        <div>
          <h1>${title}</h1>
          ${p
            ? html`<p class="page-intro">${statusBadge(p.state)} ${p.type} · version ${p.version} · updated
              ${formatDate(p.updated_at)} ${
              p.deprecated
                ? html`<sl-badge variant="warning">Deprecated</sl-badge> ${p.deprecation_message}`
                : nothing
            }</p>`
            : nothing}
        </div>
        <div class="page-actions">${this.#actions()}</div>
      </header>
      ${this.renderLoadError()}
      ${p && this.revision
        ? html`<sl-alert variant="primary" open class="revision-note">
          <sl-icon slot="icon" name="pencil-square"></sl-icon>
          You are editing a revision of version ${p.version}. Nodes keep receiving version ${p.version} until the
          revision is released; discarding it leaves the policy as it is.
        </sl-alert>`
        : nothing}
      ${p && p.state !== "draft" && !this.revision
        ? html`<sl-alert variant="primary" open class="read-only-note">
          <sl-icon slot="icon" name="lock"></sl-icon>
          ${p.state === "released" ? "Released" : "Archived"} policies are read-only. ${
          p.state === "released"
            ? "Edit starts a revision: nodes keep this version until you release the revision."
            : "Move the policy to draft to edit it."
        }
        </sl-alert>`
        : nothing}
      ${this.warning ? html`<sl-alert variant="warning" open>${this.warning}</sl-alert>` : nothing}
      ${this.saveError && !(this.saveError instanceof ApiError && this.saveError.fields.length)
        ? errorAlert(this.saveError)
        : nothing}
      ${p ? html`<svc-rollout-trend policy-id=${p.id} version=${p.version}></svc-rollout-trend>` : nothing}
      ${p?.state === "released" && session.can("compliance:view")
        ? html`<svc-policy-rollout policy-id=${p.id} data-version=${p.version}></svc-policy-rollout>`
        : nothing}
      ${this.#details(editable)}
      ${p && this.revision
        ? renderContentDiff({
          releasedVersion: p.version,
          released: { description: p.description, value: this.releasedValue },
          revision: {
            description: this.#input("description") || this.revision.description,
            value: this.value,
          },
        })
        : nothing}
      ${this.type ? this.#content(editable) : nothing}
      ${p && this.assigning
        ? html`
          <svc-binding-dialog .policy=${p} @binding-dialog-partial=${() => this.reload()}
            @binding-dialog-done=${(e: CustomEvent<number>) => {
              this.assigning = false;
              if (e.detail) void this.reload();
            }}></svc-binding-dialog>
        `
        : nothing}
    `;
  }

  #actions(): TemplateResult {
    const p = this.policy;
    const editable = this.#editable;
    const blocking = this.issues.length;
    return html`
      ${editable
        ? html`
          <sl-button variant="primary" class="save-policy" ?loading=${this.saving}
            ?disabled=${!this.type || blocking > 0} @click=${this.#save}
            title=${blocking ? `Fix ${blocking} problem${blocking === 1 ? "" : "s"} first` : ""}>
                    <sl-icon slot="prefix" name="check-lg"></sl-icon>${this.#isNew
                      ? "Create draft"
                      : this.revision
                      ? "Save revision"
                      : "Save"}</sl-button>
        `
        : nothing}
      ${p?.state === "released" && !this.revision && session.can("policy:edit")
        ? html`<sl-button variant="primary" class="start-revision" @click=${this.#startRevision}>
          <sl-icon slot="prefix" name="pencil"></sl-icon>Edit</sl-button>`
        : nothing}
      ${p && this.revision && session.can("policy:release")
        ? html`
          <sl-button variant="success" class="release-revision" ?disabled=${blocking > 0}
            @click=${this.#releaseRevision}>Release revision</sl-button>
        `
        : nothing}
      ${p && this.revision && session.can("policy:edit")
        ? html`<sl-button variant="danger" outline class="discard-revision" @click=${this.#discardRevision}>
          Discard revision</sl-button>`
        : nothing}
      ${p && p.state !== "archived" && session.can("binding:create")
        ? html`<sl-button class="assign-groups" @click=${() => this.assigning = true}>
          <sl-icon slot="prefix" name="diagram-3"></sl-icon>Assign to groups</sl-button>`
        : nothing}
      ${p && session.can("policy:create")
        ? html`<sl-button class="duplicate-policy" @click=${this.#duplicate}>
          <sl-icon slot="prefix" name="copy"></sl-icon>Duplicate</sl-button>`
        : nothing}
      ${p
        ? lifecycleActions(p).filter((a) => a.permissions.every((x) => session.can(x))).map((a) =>
          html`
            <sl-button class=${`state-${a.target}`} ?disabled=${!!a.refusal} title=${a.refusal ?? ""}
              @click=${() => this.#changeState(a.target, a.label)}>${a.label}</sl-button>
          `
        )
        : nothing}
    `;
  }

  #details(editable: boolean): TemplateResult {
    const p = this.policy;
    const err = this.saveError;
    const types = listPolicyTypes();
    return html`
      <section class="card policy-details form-grid" aria-label="Details">
        <sl-input name="name" label="Name" required value=${p?.name ??
          ""} ?disabled=${!editable || !!this.revision} autocomplete="off"
          class=${fieldError(err, "name") ? "has-error" : ""} help-text=${fieldError(err, "name")}
          @sl-input=${() => this.dirty = true}></sl-input>
        <sl-textarea name="description" label="Description" rows="2" value=${this.revision?.description ??
          p?.description ?? ""} ?disabled=${!editable}
          class=${fieldError(err, "description") ? "has-error" : ""} help-text=${fieldError(
            err,
            "description",
          )}
          @sl-input=${() => this.dirty = true}></sl-textarea>
        ${this.#isNew ? this.#typeTiles(types.map((t) => t.wireName), fieldError(err, "type")) : nothing}
        ${this.type
          ? html`<div class="muted type-summary">${
            typeSummary(this.type).map((p) => html`<p>${p}</p>`)
          }</div>`
          : nothing}
      </section>
    `;
  }

  /**
   * The type of a new policy, chosen from tiles naming what each type manages (native radio buttons: Tab
   * reaches the group, arrows move between types).
   */
  #typeTiles(types: string[], error: string): TemplateResult {
    return html`
      ${TILE_STYLE}
      <fieldset class="type-tiles ${error ? "has-error" : ""}">
        <legend>Type <span class="muted">(cannot be changed once the policy exists)</span></legend>
        ${types.map((t) => {
          const info = policyTypeInfo(t);
          return html`
            <label class="type-tile" data-type=${t}>
              <input type="radio" name="type" value=${t} .checked=${this.type === t}
                @change=${() => this.#setType(t)}>
              <span class="type-tile-label">${info.label}</span>
              <span class="type-tile-description">${info.description}</span>
            </label>
          `;
        })}
        ${error ? html`<p class="field-error">${error}</p>` : nothing}
      </fieldset>
    `;
  }

  #content(editable: boolean): TemplateResult {
    const def = getPolicyType(this.type);
    // A new policy starts empty, which is not yet a problem: no red before the first change.
    const untouched = this.#isNew && !this.contentTouched;
    const issues = untouched ? [] : this.issues;
    const general = issues.filter((i) => i.field === "");
    return html`
      <section aria-label="Content" class="policy-content">
        <h2>Settings</h2>
        ${untouched
          ? html`<p class="validation-summary muted" role="status">
            Choose the settings this policy manages; problems are shown once you start.</p>`
          : html`<p class="validation-summary ${this.issues.length ? "field-error" : "muted"}" role="status">
            ${
            this.issues.length === 0
              ? "No problems found."
              : `${this.issues.length} problem${this.issues.length === 1 ? "" : "s"} to fix before saving.`
          }
            ${
            general.map((i) =>
              html`<span class="general-issue"> ${i.message[0].toUpperCase()}${i.message.slice(1)}.</span>`
            )
          }
          </p>`}
        <sl-tab-group @sl-tab-show=${(e: CustomEvent<{ name: string }>) =>
          this.view = e.detail.name as "form" | "json"}>
          ${def
            ? html`<sl-tab slot="nav" panel="form" ?active=${this.view === "form"}>Form</sl-tab>`
            : nothing}
          <sl-tab slot="nav" panel="json" ?active=${this.view === "json" || !def}>JSON</sl-tab>
          ${def
            ? html`
              <sl-tab-panel name="form" ?active=${this.view === "form"}>
                ${typeForm(editorFor(this.type), {
                  value: this.value,
                  issues,
                  readOnly: !editable,
                  onChange: this.#onValue,
                }) ??
                  html`
                    <svc-schema-form .schema=${def.schema} .value=${this.value} .issues=${issues}
                      .hints=${editorFor(this.type).hints} ?read-only=${!editable} @value-change=${this
                        .#onValue}></svc-schema-form>
                  `}
              </sl-tab-panel>
            `
            : nothing}
          <sl-tab-panel name="json" ?active=${this.view === "json" || !def}>
            ${!def
              ? html`<p class="muted">The server does not know the type ${this.type}; edit its content as JSON.</p>`
              : nothing}
            <sl-textarea label="Content (JSON)" rows="18" ?disabled=${!editable}
              value=${JSON.stringify(this.value, null, 2)} help-text=${this.jsonError ?? ""}
              class=${this.jsonError ? "json-view has-error" : "json-view"}
              @sl-change=${(e: Event) =>
                this.#onJson(String((e.target as HTMLTextAreaElement).value))}></sl-textarea>
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
}

customElements.define("svc-policy-editor-page", SvcPolicyEditorPage);
