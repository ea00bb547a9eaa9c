/**
 * `/policies/:policyId/edit`: the editor of an existing policy (new ones are made in the guided flow,
 * `policy_flow.ts`). Details (name, description), the typed form generated from the shared registry's content
 * message, a JSON view of the same value, and the version history with rollback.
 * Every change is validated in the browser by the same `validatePolicyContent` the server runs, and
 * problems appear next to their field. Drafts are edited directly. A released policy is changed through a
 * revision: "Edit" starts one, the page then edits the revision and shows its diff against the released
 * version, which nodes keep receiving until "Release revision" (or "Discard revision"). Archived policies are
 * read-only. "Duplicate" copies any policy into a new draft.
 */
import { html, nothing, type TemplateResult } from "lit";
import type { ValidationIssue } from "../../../shared/policy_types/mod.ts";
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
import { contentToValue, type JsonObject } from "../content.ts";
import { lockoutField, withLockoutReason } from "../components/session_lockout_dialog.ts";
import type { Policy, PolicyRevision } from "../api_types.ts";
import { renderContentDiff } from "../components/content_diff.ts";
import "../components/policy_rollout.ts";
import "../components/binding_dialog.ts";
import "../components/policy_history.ts";
import { labelIssues } from "../editors/enum_labels.ts";
import { parseJsonView, renderSettingsSection, typeSummary, validate } from "../components/policy_form.ts";

class SvcPolicyEditorPage extends PageElement {
  static override properties = PageElement.withState(
    "policy",
    "type",
    "value",
    "issues",
    "warning",
    "saveError",
    "dirty",
    "view",
    "jsonError",
    "saving",
    "revision",
    "releasedValue",
    "assigning",
  );
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
    this.assigning = false;
  }

  get #editable(): boolean {
    if (!session.can("policy:edit")) return false;
    return this.policy?.state === "draft" || (this.policy?.state === "released" && !!this.revision);
  }

  protected override async load(): Promise<void> {
    const policy = await api.call("GET /api/v1/policies/all/{id}", {
      path: { id: this.route.params.policyId },
    });
    const revision = policy.state === "released" && policy.revision_pending
      ? await api.call("GET /api/v1/policies/all/{id}/revision", { path: { id: policy.id } }).catch((err) => {
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

  #onValue = (e: CustomEvent<JsonObject>) => {
    this.value = e.detail;
    this.issues = validate(this.type, this.value);
    this.dirty = true;
    this.jsonError = undefined;
  };

  #onJson(text: string): void {
    const parsed = parseJsonView(text);
    this.jsonError = parsed.error;
    if (!parsed.value) return;
    this.value = parsed.value;
    this.issues = validate(this.type, parsed.value);
    this.dirty = true;
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
      if (this.revision) {
        this.revision = await api.call("PUT /api/v1/policies/all/{id}/revision", {
          path: { id: this.policy!.id },
          body: { description, content },
        });
        this.dirty = false;
        notify("Revision saved; nodes keep the released version until you release it", "success");
        await this.reload();
      } else {
        this.policy = await api.call("PUT /api/v1/policies/all/{id}", {
          path: { id: this.policy!.id },
          body: { name, description, content, version: this.policy!.version },
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
    try {
      await withLockoutReason((reason) =>
        api.call("PUT /api/v1/policies/all/{id}/state", {
          path: { id: p.id },
          body: { state: target, ...lockoutField(reason) },
        })
      );
      if (dropsRevision) {
        await api.call("DELETE /api/v1/policies/all/{id}/revision", { path: { id: p.id } }).catch((err) => {
          if (!(err instanceof ApiError && err.status === 404)) throw err;
        });
      }
      notify(`${p.name}: ${label.toLowerCase()} done`, "success");
      await this.reload();
    } catch (err) {
      notifyError(err);
    }
  }

  /** "Edit" on a released policy: starts a revision from the released content. */
  async #startRevision(): Promise<void> {
    try {
      await api.call("PUT /api/v1/policies/all/{id}/revision", { path: { id: this.policy!.id }, body: {} });
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
    try {
      const released = await withLockoutReason((reason) =>
        api.call("POST /api/v1/policies/all/{id}/revision/release", {
          path: { id: p.id },
          body: lockoutField(reason),
        })
      );
      notify(`${p.name}: version ${released.version} released`, "success");
      await this.reload();
    } catch (err) {
      notifyError(err);
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
      await api.call("DELETE /api/v1/policies/all/{id}/revision", { path: { id: p.id } });
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
      const copy = await api.call("POST /api/v1/policies/all/{id}/duplicate", {
        path: { id: this.policy!.id },
        body: {},
      });
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

  override render() {
    if (!this.policy) {
      return html`${this.renderLoadError()}${this.loadError ? nothing : html`<sl-spinner></sl-spinner>`}`;
    }
    const p = this.policy;
    const editable = this.#editable;
    const title = p!.name;
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
          type: p.type,
          releasedVersion: p.version,
          released: { description: p.description, value: this.releasedValue },
          revision: {
            description: this.#input("description") || this.revision.description,
            value: this.value,
          },
        })
        : nothing}
      ${this.type ? this.#content(editable) : nothing}
      ${p
        ? html`<svc-policy-history .policy=${p} @restored=${() => this.reload()}></svc-policy-history>`
        : nothing}
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
                    <sl-icon slot="prefix" name="check-lg"></sl-icon>${this.revision
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
        ${this.type
          ? html`<div class="muted type-summary">${
            typeSummary(this.type).map((p) => html`<p>${p}</p>`)
          }</div>`
          : nothing}
      </section>
    `;
  }

  #content(editable: boolean): TemplateResult {
    return renderSettingsSection({
      type: this.type,
      value: this.value,
      issues: this.issues,
      editable,
      untouched: false,
      view: this.view,
      jsonError: this.jsonError,
      onValue: this.#onValue,
      onJson: (text) => this.#onJson(text),
      onView: (view) => this.view = view,
    });
  }
}

customElements.define("svc-policy-editor-page", SvcPolicyEditorPage);
