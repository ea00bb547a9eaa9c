/**
 * `<svc-policy-history>`: the released versions of a policy, newest first — who released each, when and how
 * (a draft released, a revision, a rollback naming the version it restored) — each opening onto what it
 * changed against the version before it, setting by setting. "Restore this version" starts a revision from an
 * old version's content (a draft is edited to it); nothing of the history is rewritten, and the revision is
 * released like any other. Fires `restored` after a restore.
 */
import { LightElement, stateProperties } from "./light_element.ts";
import { html, nothing, type TemplateResult } from "lit";
import { repeat } from "lit/directives/repeat.js";
import { api } from "../api.ts";
import { session } from "../session.ts";
import { contentToValue } from "../content.ts";
import { confirmAction, formatDate, notify, notifyError } from "./ui.ts";
import { errorText } from "./page.ts";
import { renderSettingChanges } from "./content_diff.ts";
import type { Answer } from "../api.ts";
import type { Policy } from "../api_types.ts";

/** A released version as the history lists it (the API's own type). */
export type PolicyVersionSummary = Answer<"GET /api/v1/policies/all/{id}/versions">["items"][number];

type PolicyVersion = Answer<"GET /api/v1/policies/all/{id}/versions/{version}">;

/** How a version came to be, in words. */
export function originText(v: PolicyVersionSummary): string {
  if (v.origin === "rollback") return `Rollback to version ${v.restored_from}`;
  if (v.origin === "revision") return "Revision released";
  return "Released";
}

class SvcPolicyHistory extends LightElement {
  static override properties = {
    policy: { attribute: false },
    ...stateProperties("versions", "contents", "error"),
  };
  declare policy: Policy;
  declare versions: PolicyVersionSummary[] | undefined;
  /** Loaded contents by version. */
  declare contents: Map<number, PolicyVersion>;
  declare error: unknown;
  #loadedFor = "";

  constructor() {
    super();
    this.contents = new Map();
  }

  override updated(): void {
    const key = `${this.policy?.id}@${this.policy?.version}/${this.policy?.revision_pending}`;
    if (this.policy && key !== this.#loadedFor) {
      this.#loadedFor = key;
      void this.#load();
    }
  }

  async #load(): Promise<void> {
    try {
      this.versions =
        (await api.call("GET /api/v1/policies/all/{id}/versions", { path: { id: this.policy.id } })).items;
      this.error = undefined;
    } catch (err) {
      this.error = err;
    }
  }

  async #content(version: number): Promise<PolicyVersion> {
    const known = this.contents.get(version);
    if (known) return known;
    const v = await api.call("GET /api/v1/policies/all/{id}/versions/{version}", {
      path: { id: this.policy.id, version: String(version) },
    });
    this.contents = new Map(this.contents).set(version, v);
    return v;
  }

  /** Loads a version and the one before it when its panel opens. */
  async #open(version: number): Promise<void> {
    const list = this.versions ?? [];
    const i = list.findIndex((v) => v.version === version);
    try {
      await Promise.all([
        this.#content(version),
        ...(list[i + 1] ? [this.#content(list[i + 1].version)] : []),
      ]);
    } catch (err) {
      notifyError(err);
    }
  }

  async #restore(v: PolicyVersionSummary): Promise<void> {
    const p = this.policy;
    const released = p.state === "released";
    const ok = await confirmAction({
      title: `Restore version ${v.version} of ${p.name}`,
      message: released
        ? `A revision is started with the settings and description of version ${v.version}. Nodes keep version ${p.version} until you release the revision; the history keeps every version as it was.`
        : `The draft's settings and description become those of version ${v.version}. Nothing reaches nodes until it is released.`,
      confirmLabel: released ? "Start revision from this version" : "Restore into the draft",
    });
    if (!ok) return;
    try {
      await api.call("POST /api/v1/policies/all/{id}/versions/{version}/restore", {
        path: { id: p.id, version: String(v.version) },
      });
      notify(
        released
          ? `Revision started from version ${v.version}; release it to roll back`
          : `Draft restored to version ${v.version}`,
        "success",
      );
      this.dispatchEvent(new Event("restored", { bubbles: true }));
    } catch (err) {
      notifyError(err);
    }
  }

  #canRestore(v: PolicyVersionSummary): boolean {
    const p = this.policy;
    if (!session.can("policy:edit") || p.state === "archived") return false;
    if (p.state === "released") return v.version !== p.version && !p.revision_pending;
    return true;
  }

  #changes(v: PolicyVersionSummary, previous: PolicyVersionSummary | undefined): TemplateResult {
    const own = this.contents.get(v.version);
    const before = previous ? this.contents.get(previous.version) : undefined;
    if (!own || (previous && !before)) return html`<sl-spinner aria-label="Loading"></sl-spinner>`;
    const type = this.policy.type;
    if (!previous) {
      return html`<p class="muted">The first released version.</p>`;
    }
    return renderSettingChanges({
      type,
      before: {
        label: `Version ${previous.version}`,
        description: before!.description,
        value: contentToValue(type, before!.content).value,
      },
      after: {
        label: `Version ${v.version}`,
        description: own.description,
        value: contentToValue(type, own.content).value,
      },
      unchanged: `The same settings as version ${previous.version}.`,
    });
  }

  override render() {
    if (this.error) return html`<sl-alert variant="danger" open>${errorText(this.error)}</sl-alert>`;
    const list = this.versions;
    if (!list) return html`<sl-spinner aria-label="Loading"></sl-spinner>`;
    return html`
      <section class="card policy-history" aria-labelledby="policy-history-title">
        <h2 id="policy-history-title">Version history</h2>
        ${list.length === 0
          ? html`<p class="muted">No version released yet: the history starts when the policy is released.</p>`
          : nothing}
        ${this.policy.state === "released" && this.policy.revision_pending && list.length > 1
          ? html`<p class="muted">A revision is pending: release or discard it before restoring another version.</p>`
          : nothing}
        ${repeat(list, (v) => v.version, (v, i) =>
          // Keyed by version: a newly released version gets a closed entry of its own, never the element
          // (and the open state) of the version that was first before it.
          html`
            <sl-details class="history-version" data-version=${v.version}
              @sl-show=${(e: Event) => {
                if (e.target === e.currentTarget) void this.#open(v.version);
              }}>
              <span slot="summary" class="history-summary">
                <strong>Version ${v.version}</strong>
                ${v.version === this.policy.version && this.policy.state === "released"
                  ? html`<sl-badge variant="success" pill>Current</sl-badge>`
                  : nothing}
                <span class="muted">${originText(v)} by ${v.released_by || "(before history was kept)"} ·
                  ${formatDate(v.released_at)}</span>
              </span>
              ${this.#changes(v, list[i + 1])}
              ${this.#canRestore(v)
                ? html`<sl-button size="small" class="restore-version" @click=${() => this.#restore(v)}>
                  <sl-icon slot="prefix" name="arrow-counterclockwise"></sl-icon>Restore this version</sl-button>`
                : nothing}
            </sl-details>
          `)}
      </section>
    `;
  }
}

customElements.define("svc-policy-history", SvcPolicyHistory);
