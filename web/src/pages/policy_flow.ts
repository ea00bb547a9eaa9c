/**
 * `/policies/new`: the guided way from nothing to a policy on nodes, in five steps — create (name, type),
 * configure (the type's form), review (the settings by name), assign to groups (with what will reach which
 * nodes, and who wins against the policies of the type they already have) and release. A stepper says where
 * you are (`aria-current="step"`, earlier steps can be reopened); an action bar stays at the bottom of the
 * viewport with Back, Next and the step's primary action.
 *
 * The draft is saved on the server when the settings are done (Configure → Next), so nothing typed is lost
 * and the server's validation speaks before the review. Releasing creates the bindings (disabled), releases
 * the policy, then enables them; the SessionAccess lockout guard's refusal opens its dialog right here, and
 * the reason given is used for the rest of the release. Leaving with unsaved changes asks first (the shell's
 * guard, through `hasUnsavedChanges`). Existing policies are edited in the policy editor.
 */
import { html, nothing, type TemplateResult } from "lit";
import { getPolicyType, listPolicyTypes, type ValidationIssue } from "../../../shared/policy_types/mod.ts";
import { api, ApiError } from "../api.ts";
import { session } from "../session.ts";
import { navigate } from "../router.ts";
import { PageElement } from "../components/page.ts";
import { columns, errorAlert, fieldError, notify } from "../components/ui.ts";
import { askLockoutReason, lockoutField } from "../components/session_lockout_dialog.ts";
import {
  parseJsonView,
  renderSettingsSection,
  renderTypeTiles,
  typeSummary,
  validate,
} from "../components/policy_form.ts";
import { contentToValue, type JsonObject } from "../content.ts";
import { labelIssues } from "../editors/enum_labels.ts";
import { policyTypeInfo } from "../editors/type_info.ts";
import { settingsOf } from "../setting_diff.ts";
import { type Contender, type GroupPreview, previewGroup } from "../reach_preview.ts";
import { roleAdvice } from "../permission_text.ts";
import type { NodeGroup, Policy } from "../api_types.ts";

/** The steps, in order. */
export const FLOW_STEPS = [
  { id: "create", label: "Create" },
  { id: "configure", label: "Configure" },
  { id: "review", label: "Review" },
  { id: "assign", label: "Assign to groups" },
  { id: "release", label: "Release" },
] as const;

const CREATE = 0;
const CONFIGURE = 1;
const REVIEW = 2;
const ASSIGN = 3;
const RELEASE = 4;

/** One step of the release, as the outcome list shows it. */
interface ReleaseStep {
  text: string;
  ok: boolean;
}

/** A group's preview: loading, or what releasing there means. */
type Preview = { loading: true } | { loading: false; preview: GroupPreview } | {
  loading: false;
  error: string;
};

class SvcPolicyFlowPage extends PageElement {
  static override properties = PageElement.withState(
    "step",
    "reached",
    "name",
    "description",
    "type",
    "value",
    "issues",
    "contentTouched",
    "view",
    "jsonError",
    "draft",
    "error",
    "detailErrors",
    "busy",
    "groups",
    "chosen",
    "previews",
    "outcome",
  );
  /** Index of the step shown. */
  declare step: number;
  /** The furthest step reached (the stepper reopens any step up to it). */
  declare reached: number;
  declare name: string;
  declare description: string;
  declare type: string;
  declare value: JsonObject;
  declare issues: ValidationIssue[];
  declare contentTouched: boolean;
  declare view: "form" | "json";
  declare jsonError: string | undefined;
  /** The draft once saved on the server. */
  declare draft: Policy | undefined;
  declare error: unknown;
  /** Problems of the Create step's fields, by field. */
  declare detailErrors: Record<string, string>;
  declare busy: string;
  declare groups: NodeGroup[] | undefined;
  /** Chosen groups → the priority of their binding. */
  declare chosen: Map<string, number>;
  declare previews: Map<string, Preview>;
  /** The release's steps once it ran (partly or fully). */
  declare outcome: ReleaseStep[] | undefined;
  /** What was last saved, to tell unsaved changes. */
  #saved = "";
  #released = false;
  #lockoutReason: string | undefined;
  #contents = new Map<string, JsonObject>();

  override pageTitle = "New policy";

  constructor() {
    super();
    this.step = CREATE;
    this.reached = CREATE;
    this.name = "";
    this.description = "";
    this.type = "";
    this.value = {};
    this.issues = [];
    this.contentTouched = false;
    this.view = "form";
    this.detailErrors = {};
    this.busy = "";
    this.chosen = new Map();
    this.previews = new Map();
  }

  protected override load(): Promise<void> {
    const requested = this.route?.query.get("type") ?? "";
    if (!this.draft && !this.#saved) {
      if (getPolicyType(requested)) this.#setType(requested);
      // A type chosen by the link that opened the flow is where it starts, not a change of the person's.
      this.#saved = this.#snapshot();
    }
    return Promise.resolve();
  }

  /** What is typed and chosen, to compare with what was saved. */
  #snapshot(): string {
    return JSON.stringify([this.name.trim(), this.description, this.type, this.value]);
  }

  /** Typed details or settings not saved yet, or groups chosen and not released to. */
  override hasUnsavedChanges(): boolean {
    if (this.#released || !session.can("policy:create")) return false;
    const typed = this.#snapshot() !== this.#saved;
    return typed || this.chosen.size > 0;
  }

  #setType(type: string): void {
    if (this.draft) return;
    this.type = type;
    this.contentTouched = false;
    this.value = {};
    this.issues = type ? validate(type, {}) : [];
    this.detailErrors = { ...this.detailErrors, type: "" };
  }

  #onValue = (e: CustomEvent<JsonObject>) => {
    this.contentTouched = true;
    this.value = e.detail;
    this.issues = validate(this.type, this.value);
    this.jsonError = undefined;
  };

  #onJson(text: string): void {
    const parsed = parseJsonView(text);
    this.jsonError = parsed.error;
    if (!parsed.value) return;
    this.contentTouched = true;
    this.value = parsed.value;
    this.issues = validate(this.type, parsed.value);
  }

  // Moving between steps -------------------------------------------------------------------------------------

  /** Shows step `i` and moves the focus to its heading, so keyboard and screen-reader users start there. */
  async #go(i: number): Promise<void> {
    this.step = i;
    this.reached = Math.max(this.reached, i);
    this.error = undefined;
    if (i >= ASSIGN) void this.#loadGroups();
    await this.updateComplete;
    this.querySelector<HTMLElement>(".flow-step-title")?.focus();
  }

  async #next(): Promise<void> {
    if (this.step === CREATE) {
      const errors: Record<string, string> = {};
      if (!this.name.trim()) errors.name = "Give the policy a name (it is how lists and logs show it).";
      if (!this.type) errors.type = "Choose what the policy manages.";
      this.detailErrors = errors;
      if (Object.keys(errors).length) {
        await this.updateComplete;
        this.querySelector<HTMLElement>(
          errors.name ? ".flow-details sl-input[name=name]" : ".type-tiles input",
        )
          ?.focus();
        return;
      }
      return await this.#go(CONFIGURE);
    }
    if (this.step === CONFIGURE) {
      this.contentTouched = true;
      if (this.issues.length) {
        notify(
          `Fix ${this.issues.length} problem${this.issues.length === 1 ? "" : "s"} in the settings first.`,
          "warning",
        );
        return;
      }
      if (await this.#saveDraft()) await this.#go(REVIEW);
      return;
    }
    if (this.step < RELEASE) await this.#go(this.step + 1);
  }

  /** Creates the draft, or saves what changed since; false (with the problem shown) when refused. */
  async #saveDraft(): Promise<boolean> {
    if (this.draft && this.#snapshot() === this.#saved) return true;
    this.busy = "save";
    this.error = undefined;
    const body = {
      name: this.name.trim(),
      description: this.description,
      content: JSON.stringify(this.value),
    };
    try {
      this.draft = this.draft
        ? await api.call("PUT /api/v1/policies/all/{id}", {
          path: { id: this.draft.id },
          body: { ...body, version: this.draft.version },
        })
        : await api.call("POST /api/v1/policies/all", { body: { ...body, type: this.type } });
      // No toast: the review says it is saved, and on a phone a toast would cover the action bar.
      this.#saved = this.#snapshot();
      return true;
    } catch (err) {
      this.#showSaveError(err);
      return false;
    } finally {
      this.busy = "";
    }
  }

  #showSaveError(err: unknown): void {
    this.error = err;
    if (!(err instanceof ApiError)) return;
    const content = err.fields.filter((f) => f.field === "content" || f.field.startsWith("content."));
    if (content.length) {
      this.issues = labelIssues(
        this.type,
        content.map((f) => ({ field: f.field.replace(/^content\.?/, ""), message: f.message })),
      );
    }
    const nameProblem = fieldError(err, "name") ||
      (err.status === 409 && /named/.test(err.message) ? err.message : "");
    if (nameProblem) {
      this.detailErrors = { ...this.detailErrors, name: nameProblem };
      void this.#go(CREATE);
    }
  }

  /** "Save draft and close": the draft is kept and opens in the policy editor. */
  async #saveAndClose(): Promise<void> {
    this.contentTouched = true;
    if (this.issues.length) return;
    if (!await this.#saveDraft()) return;
    this.#released = true;
    notify(`Draft ${this.draft!.name} saved (version ${this.draft!.version})`, "success");
    navigate(`/policies/${this.draft!.id}/edit`, { replace: true });
  }

  // Groups and what reaches them ------------------------------------------------------------------------------

  async #loadGroups(): Promise<void> {
    if (this.groups || !session.can("node_group:view")) return;
    try {
      this.groups = (await api.call("GET /api/v1/node-groups", {
        query: { per_page: 200, sort: "name", order: "asc" },
      })).items;
    } catch (err) {
      this.error = err;
    }
  }

  #toggleGroup(group: NodeGroup, on: boolean): void {
    const chosen = new Map(this.chosen);
    if (on) chosen.set(group.id, chosen.get(group.id) ?? 0);
    else chosen.delete(group.id);
    this.chosen = chosen;
    if (on) void this.#preview(group.id);
  }

  #setPriority(groupId: string, priority: number): void {
    if (!Number.isInteger(priority)) return;
    this.chosen = new Map(this.chosen).set(groupId, priority);
    void this.#preview(groupId);
  }

  async #content(policyId: string): Promise<JsonObject> {
    const known = this.#contents.get(policyId);
    if (known) return known;
    const p = await api.call("GET /api/v1/policies/all/{id}", { path: { id: policyId } });
    const value = contentToValue(p.type, p.content ?? "").value;
    this.#contents.set(policyId, value);
    return value;
  }

  /** The other enabled policies of the type bound to the group, and who wins against them. */
  async #preview(groupId: string): Promise<void> {
    const draft = this.draft;
    if (!draft || !this.chosen.has(groupId)) return;
    this.previews = new Map(this.previews).set(groupId, { loading: true });
    try {
      const bindings = session.can("binding:view")
        ? (await api.call("GET /api/v1/policy-bindings", {
          query: { node_group_id: groupId, state: "enabled", per_page: 200 },
        })).items.filter((b) => b.policy_type === this.type && b.policy_id !== draft.id)
        : [];
      const others: Contender[] = await Promise.all(bindings.map(async (b) => ({
        id: b.policy_id,
        name: b.policy_name,
        priority: b.priority,
        value: await this.#content(b.policy_id),
      })));
      const preview = previewGroup(
        this.type,
        { id: draft.id, name: draft.name, priority: this.chosen.get(groupId) ?? 0, value: this.value },
        others,
      );
      this.previews = new Map(this.previews).set(groupId, { loading: false, preview });
    } catch (err) {
      this.previews = new Map(this.previews).set(groupId, {
        loading: false,
        error: err instanceof Error ? err.message : String(err),
      });
    }
  }

  #chosenGroups(): NodeGroup[] {
    return (this.groups ?? []).filter((g) => this.chosen.has(g.id));
  }

  // Release ---------------------------------------------------------------------------------------------------

  /**
   * Runs `call` with the lockout reason already given in this release, if any; on the guard's refusal asks
   * for one (once per release) and tries again.
   */
  async #guarded<T>(call: (reason: string | undefined) => Promise<T>): Promise<T> {
    try {
      return await call(this.#lockoutReason);
    } catch (err) {
      if (this.#lockoutReason) throw err;
      const reason = await askLockoutReason(err);
      if (!reason) throw err;
      this.#lockoutReason = reason;
      return await call(reason);
    }
  }

  async #release(): Promise<void> {
    let policy = this.draft!;
    const groups = this.#chosenGroups();
    const canEnable = session.can("binding:edit");
    const steps: ReleaseStep[] = [];
    this.outcome = steps;
    this.busy = "release";
    this.error = undefined;
    this.#lockoutReason = undefined;
    const record = (text: string, ok: boolean) => {
      steps.push({ text, ok });
      this.outcome = [...steps];
    };
    try {
      // A release tried before and stopped part way left some of this done; it is picked up, not repeated.
      const existing = (await api.call("GET /api/v1/policy-bindings", {
        query: { policy_id: policy.id, per_page: 200 },
      })).items;
      const bindings: Array<{ id: string; state: string; group: NodeGroup }> = [];
      for (const group of groups) {
        const priority = this.chosen.get(group.id) ?? 0;
        const found = existing.find((b) => b.node_group_id === group.id);
        if (found && found.priority !== priority) {
          await api.call("PUT /api/v1/policy-bindings/{id}", { path: { id: found.id }, body: { priority } });
        }
        const id = found?.id ?? (await api.call("POST /api/v1/policy-bindings", {
          body: { policy_id: policy.id, node_group_id: group.id, priority },
        })).id;
        bindings.push({ id, state: found?.state ?? "disabled", group });
        record(`Bound to ${group.name} (priority ${priority})`, true);
      }
      if (!session.can("policy:release")) {
        record("Kept as a draft: releasing needs a role that may release policies", true);
        this.#finish(policy, "Draft kept with its bindings; ask a reviewer to release it");
        return;
      }
      if (policy.state !== "released") {
        const id = policy.id;
        policy = await this.#guarded((reason) =>
          api.call("PUT /api/v1/policies/all/{id}/state", {
            path: { id },
            body: { state: "released", ...lockoutField(reason) },
          })
        );
        this.draft = policy;
        record(`Released version ${policy.version}`, true);
      }
      for (const b of bindings) {
        const n = `${b.group.node_count} node${b.group.node_count === 1 ? "" : "s"}`;
        if (b.state === "enabled") continue;
        if (!canEnable) {
          record(`Left disabled for ${b.group.name} (${n}): enabling needs another role`, true);
          continue;
        }
        await this.#guarded((reason) =>
          api.call("PUT /api/v1/policy-bindings/{id}", {
            path: { id: b.id },
            body: { state: "enabled", ...lockoutField(reason) },
          })
        );
        record(`Enabled for ${b.group.name}: ${n}`, true);
      }
      this.#finish(
        policy,
        `${policy.name} released${groups.length ? ` to ${groups.map((g) => g.name).join(", ")}` : ""}`,
      );
    } catch (err) {
      record(err instanceof Error ? err.message : String(err), false);
      this.error = err;
    } finally {
      this.busy = "";
    }
  }

  #finish(policy: Policy, message: string): void {
    this.#released = true;
    this.chosen = new Map();
    notify(message, "success");
    navigate(`/policies/${policy.id}/edit`, { replace: true });
  }

  // Rendering -------------------------------------------------------------------------------------------------

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
    if (!session.can("policy:create")) return this.#renderCannotCreate();
    const current = FLOW_STEPS[this.step];
    return html`
      <div class="policy-flow">
        <nav aria-label="Breadcrumb" class="muted"><a href="/policies">Policies</a> / New policy</nav>
        <header class="page-header">
          <div>
            <h1>New policy</h1>
            <p class="page-intro">Step ${this.step + 1} of ${FLOW_STEPS.length}: ${current.label}</p>
          </div>
        </header>
        ${this.#stepper()}
        <div class="flow-body">
          <h2 class="flow-step-title" tabindex="-1">${current.label}</h2>
          ${this.error && !(this.error instanceof ApiError && this.error.fields.length)
            ? errorAlert(this.error)
            : nothing}
          ${this.#body()}
        </div>
        ${this.#actionBar()}
      </div>
    `;
  }

  #stepper(): TemplateResult {
    return html`
      <ol class="flow-stepper" aria-label="Steps">
        ${FLOW_STEPS.map((s, i) => {
          const state = i === this.step
            ? "current"
            : i < this.step
            ? "done"
            : i <= this.reached
            ? "open"
            : "todo";
          return html`
            <li class=${`flow-step ${state}`} data-step=${s.id} aria-current=${i === this.step
              ? "step"
              : "false"}>
              <button type="button" class="flow-step-button" ?disabled=${i > this.reached || !!this.busy ||
                i === this.step}
                @click=${() => this.#go(i)}>
                <span class="flow-step-number" aria-hidden="true">${i < this.step ? "✓" : i + 1}</span>
                <span class="flow-step-label">${s.label}</span>
                ${i < this.step ? html`<span class="visually-hidden">(done)</span>` : nothing}
              </button>
            </li>
          `;
        })}
      </ol>
    `;
  }

  #body(): TemplateResult {
    switch (this.step) {
      case CREATE:
        return this.#createStep();
      case CONFIGURE:
        return this.#configureStep();
      case REVIEW:
        return this.#reviewStep();
      case ASSIGN:
        return this.#assignStep();
      default:
        return this.#releaseStep();
    }
  }

  #createStep(): TemplateResult {
    const e = this.detailErrors;
    return html`
      <section class="card policy-details flow-details form-grid" aria-label="Details">
        <sl-input name="name" label="Name" required autocomplete="off" .value=${this.name}
          class=${e.name ? "has-error" : ""} help-text=${e.name ?? ""}
          @sl-input=${(ev: Event) => {
            this.name = String((ev.target as HTMLInputElement).value);
            if (this.detailErrors.name) this.detailErrors = { ...this.detailErrors, name: "" };
          }}></sl-input>
        <sl-textarea name="description" label="Description" rows="2" .value=${this.description}
          help-text="What the policy is for, for whoever reads it later."
          @sl-input=${(ev: Event) =>
            this.description = String((ev.target as HTMLTextAreaElement).value)}></sl-textarea>
        ${this.draft
          ? html`<p class="muted">Type: <strong>${
            policyTypeInfo(this.type).label
          }</strong> (the draft exists; its type
            is fixed).</p>`
          : renderTypeTiles({
            types: listPolicyTypes().map((t) => t.wireName),
            selected: this.type,
            error: e.type ?? "",
            onPick: (t) => this.#setType(t),
          })}
      </section>
    `;
  }

  #configureStep(): TemplateResult {
    return html`
      <div class="muted type-summary">${typeSummary(this.type).map((p) => html`<p>${p}</p>`)}</div>
      ${renderSettingsSection({
        type: this.type,
        value: this.value,
        issues: this.issues,
        editable: true,
        untouched: !this.contentTouched,
        view: this.view,
        jsonError: this.jsonError,
        onValue: this.#onValue,
        onJson: (text) => this.#onJson(text),
        onView: (view) => this.view = view,
      })}
    `;
  }

  #settingsList(): TemplateResult {
    const settings = settingsOf(this.type, this.value);
    return html`
      <div class="table-wrap">
        <table class="data flow-settings">
          <caption class="visually-hidden">Settings of ${this.name}</caption>
          <thead>
            <tr>
              <th scope="col">Setting</th>
              <th scope="col">Value</th>
            </tr>
          </thead>
          <tbody>
            ${settings.map((s) =>
              html`
                <tr data-key=${s.key}>
                  <th scope="row">${s.label}<div class="muted"><code>${s.key}</code></div></th>
                  <td>${s.text}</td>
                </tr>
              `
            )}
          </tbody>
        </table>
      </div>
    `;
  }

  #reviewStep(): TemplateResult {
    const d = this.draft;
    const n = settingsOf(this.type, this.value).length;
    return html`
      <section class="card flow-review" aria-label="What the policy does">
        <dl class="facts">
          <dt>Name</dt>
          <dd class="review-name">${this.name}</dd>
          <dt>Type</dt>
          <dd>${policyTypeInfo(this.type).label} <span class="muted">(${this.type})</span></dd>
          <dt>Description</dt>
          <dd>${this.description || html`<span class="muted">none</span>`}</dd>
          <dt>Saved</dt>
          <dd>${d ? `Draft, version ${d.version}: it reaches no node until it is released.` : "Not yet"}</dd>
        </dl>
        <h3>${n} setting${n === 1 ? "" : "s"}</h3>
        ${this.#settingsList()}
      </section>
      <p class="muted">Next, choose the node groups that receive it; the last step shows what reaches which nodes
        before anything is released.</p>
    `;
  }

  #assignStep(): TemplateResult {
    if (!session.can("binding:create")) {
      return html`<sl-alert variant="primary" open class="read-only-note">
        <sl-icon slot="icon" name="lock"></sl-icon>
        Your roles do not let you bind policies to node groups. ${
        roleAdvice(["binding:create"])
      } You can still
        release the policy; someone who may bind it assigns it later.
      </sl-alert>`;
    }
    const groups = this.groups;
    if (!groups) return html`<sl-spinner aria-label="Loading"></sl-spinner>`;
    if (groups.length === 0) {
      return html`<p class="muted">There is no node group yet: <a href="/node-groups">create one</a>, enroll nodes into
        it, then bind the policy from its page. You can release it now and assign it later.</p>`;
    }
    return html`
      <fieldset class="card flow-groups">
        <legend>Node groups that receive ${this.name}</legend>
        ${groups.map((g) => {
          const on = this.chosen.has(g.id);
          return html`
            <div class="flow-group" data-group=${g.name}>
              <sl-checkbox .checked=${on} @sl-change=${(e: Event) =>
                this.#toggleGroup(g, (e.target as HTMLInputElement).checked)}>
                ${g.name} <span class="muted">(${g.node_count} node${g.node_count === 1 ? "" : "s"})</span>
              </sl-checkbox>
              ${on
                ? html`
                  <sl-input type="number" size="small" class="flow-priority" label=${`Priority in ${g.name}`}
                    .value=${String(this.chosen.get(g.id) ?? 0)}
                    help-text="Higher wins when policies of the same type set the same setting."
                    @sl-change=${(e: Event) =>
                      this.#setPriority(g.id, Number((e.target as HTMLInputElement).value))}></sl-input>
                  ${this.#groupPreview(g)}
                `
                : nothing}
            </div>
          `;
        })}
      </fieldset>
    `;
  }

  #groupPreview(g: NodeGroup): TemplateResult {
    const p = this.previews.get(g.id);
    if (!p || p.loading) return html`<sl-spinner aria-label=${`Checking ${g.name}`}></sl-spinner>`;
    if ("error" in p) return html`<p class="field-error">${p.error}</p>`;
    const v = p.preview;
    return html`
      <div class="reach-preview" data-group=${g.name}>
        ${v.others.length
          ? html`<p>Already receives: ${
            v.others.map((o, i) => html`${i ? ", " : ""}<strong>${o.name}</strong> (priority ${o.priority})`)
          }.</p>`
          : nothing}
        <p class="reach-rule">${v.rule}</p>
        ${v.overlaps.length
          ? html`<ul class="reach-overlaps">${
            v.overlaps.map((o) =>
              html`<li data-key=${o.key}>${o.label}: <strong>${o.winner}</strong> wins over ${
                o.losers.join(", ")
              }</li>`
            )
          }</ul>`
          : nothing}
      </div>
    `;
  }

  #releaseStep(): TemplateResult {
    const groups = this.#chosenGroups();
    const nodes = groups.reduce((n, g) => n + g.node_count, 0);
    const canRelease = session.can("policy:release");
    const canEnable = session.can("binding:edit");
    return html`
      <section class="card flow-summary" aria-label="What will reach which nodes">
        <p class="release-summary">
          <strong>${this.name}</strong> (${policyTypeInfo(this.type).label}, ${settingsOf(
            this.type,
            this.value,
          ).length}
          settings) ${groups.length
            ? html`goes to ${groups.length} group${groups.length === 1 ? "" : "s"}, ${nodes} node${
              nodes === 1 ? "" : "s"
            } in all (a node in several groups counts once on it):`
            : "is released without a group: it reaches no node until it is bound to one."}
        </p>
        ${groups.length
          ? html`
            <div class="table-wrap">
              <table class="data flow-reach">
                <caption class="visually-hidden">Groups that receive ${this.name}</caption>
                <thead>
                  <tr>
                    ${columns("Group", "Nodes", "Priority", "Other policies of this type, and who wins")}
                  </tr>
                </thead>
                <tbody>
                  ${groups.map((g) => {
                    const p = this.previews.get(g.id);
                    const v = p && !p.loading && "preview" in p ? p.preview : undefined;
                    return html`
                      <tr data-group=${g.name}>
                        <th scope="row">${g.name}</th>
                        <td class="num">${g.node_count}</td>
                        <td class="num">${this.chosen.get(g.id) ?? 0}</td>
                        <td>${v
                          ? html`${
                            v.others.length
                              ? v.others.map((o) => `${o.name} (${o.priority})`).join(", ")
                              : "none"
                          }.
                            ${v.rule}`
                          : html`<sl-spinner aria-label="Checking"></sl-spinner>`}</td>
                      </tr>
                    `;
                  })}
                </tbody>
              </table>
            </div>
          `
          : nothing}
        ${!canRelease
          ? html`<p class="read-only-note">Your roles let you prepare the policy but not release it:
            ${roleAdvice(["policy:release"])} The bindings are created disabled.</p>`
          : !canEnable && groups.length
          ? html`<p class="read-only-note">Your roles do not let you enable bindings: ${
            roleAdvice(["binding:edit"])
          }</p>`
          : nothing}
      </section>
      ${this.outcome
        ? html`<ul class="release-outcome" aria-label="What was done">${
          this.outcome.map((s) =>
            html`<li class=${s.ok ? "ok" : "failed"}>${s.ok ? "✓" : "✗"} ${s.text}</li>`
          )
        }</ul>`
        : nothing}
    `;
  }

  #primary(): { label: string; action: () => void; disabled?: boolean } {
    const groups = this.#chosenGroups();
    const nodes = groups.reduce((n, g) => n + g.node_count, 0);
    switch (this.step) {
      case CREATE:
        return { label: "Next: configure", action: () => void this.#next() };
      case CONFIGURE:
        return { label: "Save draft and review", action: () => void this.#next() };
      case REVIEW:
        return { label: "Next: assign to groups", action: () => void this.#next() };
      case ASSIGN:
        return { label: "Next: release", action: () => void this.#next() };
      default:
        if (!session.can("policy:release")) {
          return { label: "Keep as draft", action: () => void this.#release() };
        }
        return {
          label: groups.length ? `Release to ${nodes} node${nodes === 1 ? "" : "s"}` : "Release",
          action: () => void this.#release(),
          disabled: !this.draft,
        };
    }
  }

  #actionBar(): TemplateResult {
    const primary = this.#primary();
    return html`
      <div class="flow-actions" role="group" aria-label="Step actions">
        <sl-button class="flow-back" ?disabled=${this.step === CREATE || !!this.busy}
          @click=${() => this.#go(this.step - 1)}>
          <sl-icon slot="prefix" name="arrow-left"></sl-icon>Back</sl-button>
        <span class="flow-position muted">Step ${this.step + 1} of ${FLOW_STEPS.length}</span>
        ${this.step === CONFIGURE
          ? html`
            <sl-button class="save-policy" ?loading=${this.busy === "save"} ?disabled=${this.issues.length >
              0}
              title=${this.issues.length
                ? `Fix ${this.issues.length} problem${this.issues.length === 1 ? "" : "s"} first`
                : ""}
              @click=${this.#saveAndClose}>Save draft and close</sl-button>
          `
          : nothing}
        <sl-button variant="primary" class="flow-next" ?loading=${!!this.busy}
          ?disabled=${!!primary.disabled || !!this.busy} @click=${primary.action}>
          ${primary.label}<sl-icon slot="suffix" name=${this.step === RELEASE
            ? "send"
            : "arrow-right"}></sl-icon>
        </sl-button>
      </div>
    `;
  }
}

customElements.define("svc-policy-flow-page", SvcPolicyFlowPage);
