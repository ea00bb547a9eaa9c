/**
 * `<svc-binding-dialog>`: binds a policy to node groups. Used by the bindings page ("New binding", with a
 * policy picker) and by the policy page ("Assign to groups", the policy fixed). The picker searches the
 * policy list on the server (by name, and by type when the words name one), so it stays quick with hundreds
 * of policies; it is a combobox: arrows move through the results, Enter picks, Escape clears. Bindings are
 * created disabled; "Enable now" (released policies only) enables them after a confirmation naming how many
 * nodes of which groups receive the policy. Fires `binding-dialog-done` with the number of bindings created.
 */
import { LightElement, stateProperties } from "./light_element.ts";
import { html, nothing, type TemplateResult } from "lit";
import { api, ApiError } from "../api.ts";
import { session } from "../session.ts";
import { confirmAction, fieldError, formError, notify, openDialog, statusBadge, whenHidden } from "./ui.ts";
import { lockoutField, withLockoutReason } from "./session_lockout_dialog.ts";
import { policyTypeInfo, typesMatching } from "../editors/type_info.ts";
import type { NodeGroup, PolicyRow as Policy } from "../api_types.ts";

/** How many matches the picker shows; more words narrow them. */
const PICKER_LIMIT = 20;
/** The picker's own look (light DOM; the console's CSP allows inline styles). */
const PICKER_STYLE = html`<style>
  svc-binding-dialog .picker-results { list-style: none; margin: 0.25rem 0 0; padding: 0; max-height: 16rem;
    overflow-y: auto; border: 1px solid var(--sl-color-neutral-300); border-radius: var(--sl-border-radius-medium); }
  svc-binding-dialog .picker-results[hidden] { display: none; }
  svc-binding-dialog .picker-results li { display: flex; gap: 0.5rem; align-items: center; flex-wrap: wrap;
    padding: 0.4rem 0.75rem; cursor: pointer; }
  svc-binding-dialog .picker-results li.active, svc-binding-dialog .picker-results li:hover {
    background: var(--sl-color-primary-100); }
  svc-binding-dialog .picker-name { font-weight: 600; }
</style>`;

/** Pause after a keystroke before the picker asks the server. */
const SEARCH_DELAY_MS = 200;

/** The picker's results: name matches first, then policies of matching types; no archived policy. */
export function mergeMatches(byName: Policy[], byType: Policy[][], limit = PICKER_LIMIT): Policy[] {
  const seen = new Set<string>();
  const out: Policy[] = [];
  for (const p of [...byName, ...byType.flat()]) {
    if (p.state === "archived" || seen.has(p.id)) continue;
    seen.add(p.id);
    out.push(p);
    if (out.length === limit) break;
  }
  return out;
}

class SvcBindingDialog extends LightElement {
  static override properties = {
    policy: { attribute: false },
    ...stateProperties("groups", "results", "query", "active", "chosen", "searching", "error", "saving"),
  };
  /** The policy to bind (the policy page); without it the dialog offers the picker. */
  declare policy: Policy | undefined;
  declare groups: NodeGroup[];
  declare results: Policy[];
  declare query: string;
  /** Index of the highlighted result. */
  declare active: number;
  declare chosen: Policy | undefined;
  declare searching: boolean;
  declare error: unknown;
  declare saving: boolean;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #search = 0;
  #done = false;

  constructor() {
    super();
    this.groups = [];
    this.results = [];
    this.query = "";
    this.active = -1;
    this.searching = false;
    this.saving = false;
  }

  override connectedCallback(): void {
    super.connectedCallback();
    this.chosen = this.policy;
    void this.#loadGroups();
    if (!this.policy) this.#runSearch("");
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    clearTimeout(this.#timer);
  }

  override firstUpdated(): void {
    void openDialog(this.querySelector("sl-dialog"));
  }

  async #loadGroups(): Promise<void> {
    try {
      this.groups = (await api.call("GET /api/v1/node-groups", {
        query: { per_page: 200, sort: "name", order: "asc" },
      })).items;
    } catch (err) {
      this.error = err;
    }
  }

  #onQuery(text: string): void {
    this.query = text;
    this.chosen = undefined;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#runSearch(text), SEARCH_DELAY_MS);
  }

  /** Asks the list route for name matches and for policies of matching types; the last search wins. */
  #runSearch(text: string): void {
    const id = ++this.#search;
    const q = text.trim();
    const page = { per_page: PICKER_LIMIT, sort: "name", order: "asc" } as const;
    this.searching = true;
    void Promise.all([
      api.call("GET /api/v1/policies/all", { query: { ...page, name: q || undefined } }),
      Promise.all(
        typesMatching(q).map((type) => api.call("GET /api/v1/policies/all", { query: { ...page, type } })),
      ),
    ]).then(([byName, byType]) => {
      if (id !== this.#search) return;
      this.results = mergeMatches(byName.items, byType.map((p) => p.items));
      this.active = this.results.length ? 0 : -1;
    }, (err) => {
      if (id === this.#search) this.error = err;
    }).finally(() => {
      if (id === this.#search) this.searching = false;
    });
  }

  #pick(p: Policy): void {
    this.chosen = p;
    this.query = p.name;
    this.results = [];
  }

  #onKey(e: KeyboardEvent): void {
    const n = this.results.length;
    if (e.key === "ArrowDown" && n) {
      this.active = (this.active + 1) % n;
    } else if (e.key === "ArrowUp" && n) {
      this.active = (this.active - 1 + n) % n;
    } else if (e.key === "Enter" && this.active >= 0 && this.results[this.active]) {
      this.#pick(this.results[this.active]);
    } else if (e.key === "Escape" && this.query) {
      // Clears the search instead of closing the dialog.
      this.#onQuery("");
    } else {
      return;
    }
    e.preventDefault();
    e.stopPropagation();
  }

  #value(sel: string): unknown {
    return (this.querySelector(sel) as { value?: unknown } | null)?.value;
  }

  #finish(created: number): void {
    if (this.#done) return;
    this.#done = true;
    this.dispatchEvent(new CustomEvent("binding-dialog-done", { detail: created, bubbles: true }));
  }

  async #submit(): Promise<void> {
    const policy = this.chosen;
    const raw = this.#value("sl-select[name=node_group_id]");
    const groupIds = (Array.isArray(raw) ? raw : raw ? [raw] : []).map(String);
    const priority = Number(this.#value("sl-input[name=priority]") || "0");
    const enable = (this.querySelector("sl-checkbox.enable-now") as { checked?: boolean } | null)?.checked ??
      false;
    if (!policy) {
      this.error = new ApiError(422, "validation_failed", "Choose a policy", [
        { field: "policy_id", message: "Choose a policy: type part of its name or type." },
      ]);
      return;
    }
    const groups = this.groups.filter((g) => groupIds.includes(g.id));
    if (enable) {
      const ok = await confirmAction({
        title: `Enable ${policy.name} for ${groups.map((g) => g.name).join(", ")}`,
        message: html`${
          groups.map((g, i) =>
            html`${i ? ", " : ""}<strong class="affected-nodes">${g.node_count} node${
              g.node_count === 1 ? "" : "s"
            }</strong> in ${g.name}`
          )
        } will receive “${policy.name}” (priority ${priority}) right away.`,
        confirmLabel: "Create and enable",
      });
      if (!ok) return;
    }
    this.saving = true;
    this.error = undefined;
    let created = 0;
    try {
      // The server checks each group (and refuses an empty choice with a field error).
      for (const node_group_id of groupIds.length ? groupIds : [""]) {
        const b = await api.call("POST /api/v1/policy-bindings", {
          body: { policy_id: policy.id, node_group_id, priority },
        });
        created++;
        if (enable) await this.#enable(b.id);
      }
      notify(
        enable
          ? `${created} binding${created === 1 ? "" : "s"} created and enabled`
          : `${
            created === 1 ? "Binding" : `${created} bindings`
          } created (disabled). Enable to deliver the policy.`,
        "success",
      );
      this.#finish(created);
    } catch (err) {
      this.error = err;
      if (created) this.dispatchEvent(new CustomEvent("binding-dialog-partial", { detail: created }));
    } finally {
      this.saving = false;
    }
  }

  /** Enables a binding; the SessionAccess lockout guard lets it through with a reason (audited). */
  async #enable(id: string): Promise<void> {
    await withLockoutReason((reason) =>
      api.call("PUT /api/v1/policy-bindings/{id}", {
        path: { id },
        body: { state: "enabled", ...lockoutField(reason) },
      })
    );
  }

  override render(): TemplateResult {
    const err = this.error;
    const field = (name: string) => ({
      cls: fieldError(err, name) ? "has-error" : "",
      msg: fieldError(err, name),
    });
    const released = this.chosen?.state === "released";
    const canEnable = session.can("binding:edit");
    return html`
      ${PICKER_STYLE}
      <sl-dialog class="binding-dialog" label=${this.policy
        ? `Assign ${this.policy.name} to groups`
        : "New binding"}
        @sl-request-close=${(e: CustomEvent<{ source: string }>) => {
          // Escape in the picker clears the search (handled there); it must not close the dialog.
          if (e.detail.source === "keyboard" && this.query && !this.policy) e.preventDefault();
        }}
        @sl-after-hide=${whenHidden(() => this.#finish(0))}>
        <div class="binding-form form-grid">
          ${formError(err)}
          ${this.policy ? this.#fixedPolicy(this.policy) : this.#picker(field("policy_id"))}
          <sl-select name="node_group_id" label="Node groups" hoist required multiple clearable
            class=${field("node_group_id").cls} help-text=${field("node_group_id").msg ||
              "One binding per group."}>
            ${this.groups.map((g) =>
              html`<sl-option value=${g.id}>${g.name} (${g.node_count} node${
                g.node_count === 1 ? "" : "s"
              })</sl-option>`
            )}
          </sl-select>
          <sl-input name="priority" label="Priority" type="number" value="0" class=${field("priority").cls}
            help-text=${field("priority").msg ||
              "Higher wins when policies of the same type set the same key."}></sl-input>
          ${canEnable
            ? html`
              <sl-checkbox class="enable-now" ?disabled=${!released}
                help-text=${released
                  ? "You confirm first; the confirmation names the nodes that receive it."
                  : "Only a released policy can be enabled; bindings start disabled."}>Enable now</sl-checkbox>
            `
            : html`<p class="muted">New bindings start disabled.</p>`}
        </div>
        <sl-button slot="footer" class="binding-cancel" @click=${() => this.#finish(0)}>Cancel</sl-button>
        <sl-button slot="footer" variant="primary" class="binding-create" ?loading=${this.saving}
          @click=${this.#submit}>Create</sl-button>
      </sl-dialog>
    `;
  }

  #fixedPolicy(p: Policy): TemplateResult {
    return html`<p class="binding-policy">${p.name} · ${policyTypeInfo(p.type).label} ${
      statusBadge(p.state)
    }</p>`;
  }

  #picker(field: { cls: string; msg: string }): TemplateResult {
    const listId = "binding-policy-results";
    const optionId = (i: number) => `binding-policy-option-${i}`;
    const expanded = this.results.length > 0 && !this.chosen;
    return html`
      <div class="policy-picker">
        <sl-input name="policy_search" label="Policy" required autocomplete="off" clearable
          placeholder="Type part of a name or type" value=${this.query} class=${field.cls}
          help-text=${field.msg ||
            (this.chosen
              ? `${policyTypeInfo(this.chosen.type).label} · ${this.chosen.state}`
              : "Drafts can be bound now and enabled once released.")}
          role="combobox" aria-autocomplete="list" aria-controls=${listId}
          aria-expanded=${expanded ? "true" : "false"}
          aria-activedescendant=${expanded && this.active >= 0 ? optionId(this.active) : ""}
          @sl-input=${(e: Event) => this.#onQuery(String((e.target as HTMLInputElement).value))}
          @sl-clear=${() => this.#onQuery("")}
          @keydown=${this.#onKey}>
          <sl-icon slot="prefix" name="search"></sl-icon>
          ${this.searching ? html`<sl-spinner slot="suffix"></sl-spinner>` : nothing}
        </sl-input>
        <ul id=${listId} role="listbox" aria-label="Matching policies" class="picker-results"
          ?hidden=${!expanded}>
          ${this.results.map((p, i) =>
            html`
              <li id=${optionId(i)} role="option" aria-selected=${i === this.active ? "true" : "false"}
                class=${i === this.active ? "active" : ""} data-policy-id=${p.id}
                @mousedown=${(e: Event) => e.preventDefault()} @click=${() => this.#pick(p)}>
                            <span class="picker-name">${p.name}</span>
                            <span class="muted">${policyTypeInfo(p.type).label}</span> ${statusBadge(p.state)}
                          </li>
            `
          )}
        </ul>
        ${!this.chosen && !this.searching && this.query.trim() && this.results.length === 0
          ? html`<p class="muted picker-empty" role="status">No policy matches “${this.query.trim()}”.</p>`
          : nothing}
      </div>
    `;
  }
}

customElements.define("svc-binding-dialog", SvcBindingDialog);
