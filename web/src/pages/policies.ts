/**
 * `/policies`: the policy list (server-side filter, sort and pages), lifecycle actions with the spec's
 * refusals explained before the person tries, deprecation, export and import with a dry-run report.
 */
import { html, nothing, type TemplateResult } from "lit";
import { type Answer, api, ApiError, type CallArgs } from "../api.ts";
import { session } from "../session.ts";
import { navigate } from "../router.ts";
import { errorText, PageElement } from "../components/page.ts";
import { ListController } from "../components/list_page.ts";
import {
  columns,
  confirmAction,
  confirmThenRun,
  downloadText,
  errorAlert,
  fieldError,
  formatDate,
  notify,
  notifyError,
  statusBadge,
  valueOf,
  whenHidden,
} from "../components/ui.ts";
import { type RolloutCounts, rolloutSummary } from "../components/policy_rollout.ts";
import { listPolicyTypes } from "../../../shared/policy_types/mod.ts";
import type { PolicyRow as Policy } from "../api_types.ts";
import "../components/file_picker.ts";
import { type LifecycleAction, lifecycleActions } from "../lifecycle.ts";

/** The import report (`POST /policies/import`). */
type ImportReport = Answer<"POST /api/v1/policies/import">;

/** What an import does with a policy whose name exists (the options of the select below). */
type OnConflict = NonNullable<CallArgs<"POST /api/v1/policies/import">["query"]>["on_conflict"];

/** A chosen bundle file. */
interface ImportFile {
  name: string;
  text: string;
  contentType: string;
}

class SvcPoliciesPage extends PageElement {
  static override properties = PageElement.withState(
    "deprecating",
    "deprecateError",
    "importing",
    "importReport",
    "importError",
    "allPolicies",
    "rollout",
  );
  /** Rollout counts of the listed policies (compliance:view only). */
  declare rollout: Record<string, RolloutCounts> | undefined;
  declare deprecating: Policy | undefined;
  declare deprecateError: unknown;
  declare importing: boolean;
  declare importReport: ImportReport | undefined;
  declare importError: unknown;
  declare allPolicies: Policy[];
  #importFile: ImportFile | undefined;
  #onConflict: OnConflict = "error";

  override pageTitle = "Policies";

  readonly list = new ListController(this, {
    operation: "GET /api/v1/policies/all",
    noun: "policies",
    sort: { key: "updated_at", dir: "desc" },
    filters: [
      { name: "name", label: "Name", kind: "search", placeholder: "Search by name" },
      {
        name: "type",
        label: "Type",
        kind: "select",
        options: () => listPolicyTypes().map((t) => [t.wireName, t.wireName]),
      },
      {
        name: "state",
        label: "State",
        kind: "select",
        options: () => [["draft", "Draft"], ["released", "Released"], ["archived", "Archived"]],
      },
      {
        name: "deprecated",
        label: "Deprecation",
        kind: "select",
        options: () => [["true", "Deprecated"], ["false", "Not deprecated"]],
      },
    ],
  });

  constructor() {
    super();
    this.deprecating = undefined;
    this.importing = false;
    this.allPolicies = [];
  }

  protected override async load(): Promise<void> {
    const page = await this.list.load();
    const released = page.items.filter((p) => p.state === "released").map((p) => p.id);
    this.rollout = released.length && session.can("compliance:view")
      ? await api.call("GET /api/v1/policies/rollout", { query: { ids: released.join(",") } })
      : {};
  }

  async #changeState(p: Policy, action: LifecycleAction): Promise<void> {
    const ok = await confirmAction({
      title: `${action.label}: ${p.name}`,
      message: action.target === "released"
        ? "Releasing makes the policy read-only. Nodes receive it once an enabled binding links it to their group."
        : action.target === "archived"
        ? "Archived policies stop reaching nodes; the agents undo their effects at the next snapshot."
        : "A draft can be edited again. It reaches no node while it is a draft.",
      confirmLabel: action.label,
    });
    if (!ok) return;
    try {
      await api.call("PUT /api/v1/policies/all/{id}/state", {
        path: { id: p.id },
        body: { state: action.target },
      });
      notify(`${p.name}: ${action.label.toLowerCase()} done`, "success");
      await this.reload();
    } catch (err) {
      notifyError(err);
    }
  }

  async #delete(p: Policy): Promise<void> {
    await confirmThenRun(
      {
        title: `Delete ${p.name}`,
        message: "The policy and its disabled bindings are deleted. This cannot be undone.",
        confirmLabel: "Delete",
        danger: true,
        typeToConfirm: p.name,
      },
      {
        run: () => api.call("DELETE /api/v1/policies/all/{id}", { path: { id: p.id } }),
        done: `${p.name} deleted`,
        then: () => this.reload(),
      },
    );
  }

  async #export(ids?: string[]): Promise<void> {
    try {
      const res = await api.fetch("GET /api/v1/policies/export", {
        query: { ids: ids?.join(","), include_bindings: ids ? undefined : true },
      });
      const disposition = res.headers.get("content-disposition") ?? "";
      const name = /filename="([^"]+)"/.exec(disposition)?.[1] ?? "policies.yaml";
      downloadText(name, await res.text(), res.headers.get("content-type") ?? "application/yaml");
    } catch (err) {
      notifyError(err);
    }
  }

  async #openDeprecate(p: Policy): Promise<void> {
    this.deprecating = p;
    this.deprecateError = undefined;
    try {
      const all = await api.call("GET /api/v1/policies/all", {
        query: { per_page: 200, sort: "name", order: "asc" },
      });
      this.allPolicies = all.items.filter((x) => x.id !== p.id);
    } catch (err) {
      this.deprecateError = err;
    }
  }

  async #saveDeprecation(deprecated: boolean): Promise<void> {
    const p = this.deprecating!;
    const form = this.querySelector<HTMLElement>(".deprecate-form")!;
    const message = String((form.querySelector("sl-textarea") as HTMLTextAreaElement | null)?.value ?? "");
    const replacement = String((form.querySelector("sl-select") as HTMLSelectElement | null)?.value ?? "");
    try {
      await api.call("POST /api/v1/policies/all/{id}/deprecate", {
        path: { id: p.id },
        body: {
          deprecated,
          message: deprecated ? message : "",
          replacement_policy_id: deprecated && replacement ? replacement : null,
        },
      });
      notify(deprecated ? `${p.name} is marked deprecated` : `${p.name} is no longer deprecated`, "success");
      this.deprecating = undefined;
      await this.reload();
    } catch (err) {
      this.deprecateError = err;
    }
  }

  /** Sends the chosen bundle; a dry run reports without writing. Refusals come back as 422 naming documents. */
  async #runImport(dryRun: boolean): Promise<void> {
    const file = this.#importFile;
    if (!file) return;
    this.importError = undefined;
    try {
      this.importReport = await api.call("POST /api/v1/policies/import", {
        query: { dry_run: dryRun, on_conflict: this.#onConflict },
        body: file.text,
        contentType: file.contentType,
      });
      if (!dryRun) {
        notify(
          `Imported ${file.name}: ${this.importReport.created} created, ${this.importReport.updated} updated`,
          "success",
        );
        await this.reload();
      }
    } catch (err) {
      this.importReport = undefined;
      this.importError = err;
    }
  }

  async #readImportFile(e: Event): Promise<void> {
    const file = (e.target as HTMLInputElement).files?.[0];
    if (!file) return;
    const json = file.name.endsWith(".json") || file.type === "application/json";
    this.#importFile = {
      name: file.name,
      text: await file.text(),
      contentType: json ? "application/json" : "application/yaml",
    };
    this.importReport = undefined;
    await this.#runImport(true);
  }

  #actions(p: Policy): TemplateResult {
    const items: TemplateResult[] = [
      html`<sl-menu-item value="edit">${
        p.state === "draft" && session.can("policy:edit") ? "Edit" : "View"
      }</sl-menu-item>`,
    ];
    for (const a of lifecycleActions(p)) {
      if (!a.permissions.every((x) => session.can(x))) continue;
      items.push(html`<sl-menu-item value=${`state:${a.target}`} ?disabled=${!!a.refusal}>
        ${a.label}${a.refusal ? html`<span class="muted"> — ${a.refusal}</span>` : nothing}
      </sl-menu-item>`);
    }
    if (session.can("policy:edit")) {
      items.push(
        html`<sl-menu-item value="deprecate">${
          p.deprecated ? "Change deprecation" : "Deprecate…"
        }</sl-menu-item>`,
      );
    }
    items.push(html`<sl-menu-item value="export">Export</sl-menu-item>`);
    if (session.can("policy:delete")) {
      const refusal = p.enabled_bindings_count > 0 ? "disable its enabled bindings first" : "";
      items.push(html`
        <sl-divider></sl-divider>
        <sl-menu-item value="delete" ?disabled=${!!refusal}>
                Delete${refusal ? html`<span class="muted"> — ${refusal}</span>` : nothing}
              </sl-menu-item>
      `);
    }
    const onSelect = (e: CustomEvent<{ item: { value: string } }>) => {
      const v = e.detail.item.value;
      if (v === "edit") navigate(`/policies/${p.id}/edit`);
      else if (v === "export") void this.#export([p.id]);
      else if (v === "delete") void this.#delete(p);
      else if (v === "deprecate") void this.#openDeprecate(p);
      else if (v.startsWith("state:")) {
        const action = lifecycleActions(p).find((a) => `state:${a.target}` === v);
        if (action) void this.#changeState(p, action);
      }
    };
    return html`
      <sl-dropdown hoist>
        <sl-icon-button slot="trigger" name="three-dots-vertical" label=${`Actions for ${p.name}`}></sl-icon-button>
        <sl-menu @sl-select=${onSelect}>${items}</sl-menu>
      </sl-dropdown>
    `;
  }

  override render() {
    const canCreate = session.can("policy:create");
    const actions = html`
      ${session.can("policy:view")
        ? html`<sl-button @click=${() =>
          this.#export()}><sl-icon slot="prefix" name="download"></sl-icon>Export all</sl-button>`
        : nothing}
      ${canCreate
        ? html`
          <sl-button @click=${() => {
            this.importing = true;
            this.importReport = undefined;
            this.importError = undefined;
          }}><sl-icon slot="prefix" name="upload"></sl-icon>Import</sl-button>
          <sl-button variant="primary" href="/policies/new" class="new-policy">
                      <sl-icon slot="prefix" name="plus-lg"></sl-icon>New policy
                    </sl-button>
        `
        : nothing}
    `;
    return html`
      ${this.renderHeader(actions, "Policies are authored as drafts, released, then bound to node groups.")}
      ${this.renderLoadError()}
      ${this.list.renderFilters()}
      ${this.#renderTable()}
      ${this.#renderDeprecateDialog()} ${this.#renderImportDialog()}
    `;
  }

  #renderTable(): TemplateResult | typeof nothing {
    return this.list.renderTable({
      caption: "Policies",
      empty: `No policies yet.${session.can("policy:create") ? " Create one with New policy." : ""}`,
      head: (s) =>
        html`
          ${s("Name", "name")} ${s("Type", "type")} ${s("Version", "version")} ${s("State", "state")}
          <th scope="col">Bindings (enabled / all)</th>
          <th scope="col">Rollout</th>
          ${s("Updated", "updated_at")}
          <th scope="col"><span class="visually-hidden">Actions</span></th>
        `,
      row: (p) =>
        html`
          <tr data-policy-id=${p.id}>
            <td>
                            <a href=${`/policies/${p.id}/edit`}>${p.name}</a>
                            ${p.description ? html`<div class="muted">${p.description}</div>` : nothing}
                          </td>
            <td>${p.type}</td>
            <td class="num">${p.version}</td>
            <td>
                            ${statusBadge(p.state)}
                            ${p.deprecated
                              ? html`<sl-badge variant="warning" pill title=${p.deprecation_message}>Deprecated</sl-badge>`
                              : nothing}
                            ${p.revision_pending
                              ? html`
                                <a class="revision-pending" href=${`/policies/${p.id}/edit`}
                                  title="A revision is being prepared; nodes keep version ${p
                                    .version} until it is released"><sl-badge
                                                                  variant="primary" pill>Revision pending</sl-badge></a>
                              `
                              : nothing}
                          </td>
            <td>${p.enabled_bindings_count} / ${p.bindings_count}</td>
            <td class="rollout-cell">${p.state === "released"
              ? rolloutSummary(this.rollout?.[p.id])
              : "—"}</td>
            <td>${formatDate(p.updated_at)}</td>
            <td class="row-actions">${this.#actions(p)}</td>
          </tr>
        `,
    });
  }

  #renderDeprecateDialog(): TemplateResult | typeof nothing {
    const p = this.deprecating;
    if (!p) return nothing;
    return html`
      <sl-dialog open label=${`Deprecation of ${p.name}`} @sl-after-hide=${whenHidden(() =>
        this.deprecating = undefined
      )}>
        <div class="deprecate-form form-grid">
          <p>Deprecated policies keep working; agents and administrators are told to move to the replacement.</p>
          ${errorAlert(this.deprecateError)}
          <sl-textarea label="Message" value=${p.deprecation_message} rows="3"
            help-text=${fieldError(this.deprecateError, "message") ||
              "Shown wherever the policy is listed."}></sl-textarea>
          <sl-select label="Replacement policy" clearable hoist value=${p.replacement_policy_id ?? ""}
            class=${fieldError(this.deprecateError, "replacement_policy_id") ? "has-error" : ""}
            help-text=${fieldError(this.deprecateError, "replacement_policy_id")}>
            ${this.allPolicies.map((x) => html`<sl-option value=${x.id}>${x.name} (${x.type})</sl-option>`)}
          </sl-select>
        </div>
        ${p.deprecated
          ? html`<sl-button slot="footer" @click=${() =>
            this.#saveDeprecation(false)}>Lift deprecation</sl-button>`
          : nothing}
        <sl-button slot="footer" variant="primary" @click=${() => this.#saveDeprecation(true)}>
          ${p.deprecated ? "Save" : "Deprecate"}
        </sl-button>
      </sl-dialog>
    `;
  }

  #renderImportDialog(): TemplateResult | typeof nothing {
    if (!this.importing) return nothing;
    const report = this.importReport;
    const err = this.importError;
    const problems = err instanceof ApiError ? err.fields : [];
    return html`
      <sl-dialog open label="Import policies" style="--width: 46rem" @sl-after-hide=${whenHidden(() =>
        this.importing = false
      )}>
        <div class="form-grid import-form">
          <p>Choose a YAML or JSON bundle exported from a svc server. A dry run checks it first; nothing is written
            until you confirm, and an import is all or nothing.</p>
          <svc-file-picker label="Bundle file" accept=".yaml,.yml,.json,application/yaml,application/json"
            @change=${this.#readImportFile}></svc-file-picker>
          <sl-select label="When a policy with the same name exists" value=${this.#onConflict} hoist
            @sl-change=${(e: Event) => {
              this.#onConflict = valueOf(e) as OnConflict;
              this.importReport = undefined;
              void this.#runImport(true);
            }}>
            <sl-option value="error">Refuse the import</sl-option>
            <sl-option value="skip">Skip it</sl-option>
            <sl-option value="new-version">Update it (drafts of the same type only)</sl-option>
          </sl-select>
          ${err
            ? html`<sl-alert variant="danger" open class="import-problems">
              <sl-icon slot="icon" name="exclamation-octagon"></sl-icon>${errorText(err)}
              ${
              problems.length ? html`<ul>${problems.map((f) => html`<li>${f.message}</li>`)}</ul>` : nothing
            }
            </sl-alert>`
            : nothing}
          ${report
            ? html`
              <section aria-label="Import report" class="import-report">
                <h2>${report.dry_run ? "Dry run: nothing written yet" : "Imported"}</h2>
                <p>${report.created} to create, ${report.updated} to update, ${report.skipped} skipped,
                              ${report.errors} problem${report.errors === 1 ? "" : "s"}.</p>
                <table class="data">
                  <caption class="visually-hidden">Documents of the bundle</caption>
                  <thead>
                    <tr>
                      ${columns("#", "Kind", "Name", "Result", "Message")}
                    </tr>
                  </thead>
                  <tbody>${report.results.map((r) =>
                    html`
                      <tr>
                        <td>${r.doc + 1}</td>
                        <td>${r.kind}</td>
                        <td>${r.name}</td>
                        <td>${r.status}</td>
                        <td>${r.message}</td>
                      </tr>
                    `
                  )}</tbody>
                </table>
              </section>
            `
            : nothing}
        </div>
        <sl-button slot="footer" @click=${() => this.importing = false}>Close</sl-button>
        <sl-button slot="footer" variant="primary" class="confirm-import"
          ?disabled=${!report || !report.dry_run || !report.ok} @click=${() =>
            this.#runImport(false)}>Import</sl-button>
      </sl-dialog>
    `;
  }
}

customElements.define("svc-policies-page", SvcPoliciesPage);
