/**
 * `<svc-node-bulk .selection=… .groups=…>`: the node list's bulk actions on the picked nodes — move to a group,
 * re-enroll, delete. Each is confirmed with the count and what it does, runs as one request
 * (`/api/v1/nodes/bulk/*`, one audit row per node) and reports node by node: what was done, what failed and
 * why, and for re-enrollment the command to run on each node. Fires `bulk-done` once the report is closed.
 */
import { boundProperties, LightElement, stateProperties } from "./light_element.ts";
import { html, nothing, type TemplateResult } from "lit";
import { api } from "../api.ts";
import { session } from "../session.ts";
import { confirmAction, errorAlert, notifyError, openDialog, whenHidden } from "./ui.ts";
import type { Selection } from "./list_page.ts";
import type { NodeGroup } from "../api_types.ts";
import type { Operations } from "../../../shared/api/svc_api.gen.ts";

type Results<K extends keyof Operations> = Operations[K]["response"] extends { results: Array<infer R> } ? R
  : never;

/** One node's outcome as the bulk routes report it (the fields of every bulk action). */
type NodeResult =
  & Results<"POST /api/v1/nodes/bulk/re-enroll">
  & Results<"POST /api/v1/nodes/bulk/move">;

/** A bulk route's answer. */
interface BulkAnswer {
  results: NodeResult[];
  succeeded: number;
  failed: number;
}

function nodes(n: number): string {
  return `${n} node${n === 1 ? "" : "s"}`;
}

/** "a, b, c and 4 more". */
function someNames(names: string[], shown = 5): string {
  return names.length <= shown
    ? names.join(", ")
    : `${names.slice(0, shown).join(", ")} and ${names.length - shown} more`;
}

class SvcNodeBulk extends LightElement {
  static override properties = {
    ...boundProperties("selection", "groups"),
    ...stateProperties("dialog", "target", "keepOthers", "report", "busy", "error"),
  };
  declare selection: Selection;
  declare groups: NodeGroup[];
  declare dialog: "" | "move" | "report";
  declare target: string;
  declare keepOthers: boolean;
  /** The outcome, with the names the nodes had when picked (a node deleted meanwhile is still named). */
  declare report: { title: string; answer: BulkAnswer; names: Map<string, string> } | undefined;
  declare busy: boolean;
  declare error: unknown;

  constructor() {
    super();
    this.groups = [];
    this.dialog = "";
    this.target = "";
    this.keepOthers = false;
    this.busy = false;
  }

  get #ids(): string[] {
    return [...this.selection.ids.keys()];
  }

  get #names(): string[] {
    return [...this.selection.ids.values()];
  }

  async #show(dialog: "move" | "report"): Promise<void> {
    this.dialog = dialog;
    await this.updateComplete;
    await openDialog(this.querySelector("sl-dialog.bulk-dialog"));
  }

  async #run(title: string, send: (nodeIds: string[]) => Promise<BulkAnswer>): Promise<void> {
    this.busy = true;
    this.error = undefined;
    try {
      const answer = await send(this.#ids);
      this.report = { title, answer, names: new Map(this.selection.ids) };
      await this.#show("report");
    } catch (err) {
      if (this.dialog === "move") this.error = err;
      else notifyError(err);
    } finally {
      this.busy = false;
    }
  }

  async #move(): Promise<void> {
    const group = this.groups.find((g) => g.id === this.target);
    if (!group) {
      this.error = new Error("Choose the group the nodes move to.");
      return;
    }
    await this.#run(`Move to ${group.name}`, (node_ids) =>
      api.call("POST /api/v1/nodes/bulk/move", {
        body: { node_ids, node_group_id: group.id, keep_other_groups: this.keepOthers },
      }));
  }

  async #reEnroll(): Promise<void> {
    const n = this.#ids.length;
    const ok = await confirmAction({
      title: `Re-enroll ${nodes(n)}`,
      message: html`
        <p>${someNames(this.#names)}.</p>
        <p
          class="bulk-effects">A certificate that is still valid is revoked now: its policy stream closes and the node
                  stops receiving policies until it re-enrolls. Each node then gets a single-use token, valid 5 minutes, and
                  the command to run on it as root. The nodes keep their groups, compliance history and audit trail.</p>
      `,
      confirmLabel: `Re-enroll ${nodes(n)}`,
      danger: true,
    });
    if (ok) {
      await this.#run(
        `Re-enroll ${nodes(n)}`,
        (node_ids) => api.call("POST /api/v1/nodes/bulk/re-enroll", { body: { node_ids } }),
      );
    }
  }

  async #delete(): Promise<void> {
    const n = this.#ids.length;
    const ok = await confirmAction({
      title: `Delete ${nodes(n)}`,
      message: html`
        <p>${someNames(this.#names)}.</p>
        <p class="bulk-effects">Every certificate of each node is revoked and its stream closed; its record, group
                  memberships and compliance results are removed. This cannot be undone: a deleted node must enroll again
                  with a new token.</p>
      `,
      confirmLabel: `Delete ${nodes(n)}`,
      danger: true,
      typeToConfirm: `delete ${nodes(n)}`,
    });
    if (ok) {
      await this.#run(
        `Delete ${nodes(n)}`,
        (node_ids) => api.call("POST /api/v1/nodes/bulk/delete", { body: { node_ids } }),
      );
    }
  }

  #close(): void {
    (this.querySelector("sl-dialog.bulk-dialog") as (HTMLElement & { hide(): void }) | null)?.hide();
  }

  override render() {
    const n = this.selection?.ids.size ?? 0;
    return html`
      ${session.can("node_group:edit")
        ? html`
          <sl-button size="small" class="bulk-move" ?disabled=${this.busy}
            @click=${() => {
              this.target = "";
              this.error = undefined;
              void this.#show("move");
            }}><sl-icon slot="prefix" name="collection"></sl-icon>Move to group…</sl-button>
        `
        : nothing}
      ${session.can("node_group:create")
        ? html`<sl-button size="small" class="bulk-re-enroll" ?disabled=${this.busy} @click=${this.#reEnroll}>
          <sl-icon slot="prefix" name="arrow-repeat"></sl-icon>Re-enroll…</sl-button>`
        : nothing}
      ${session.can("node:delete")
        ? html`
          <sl-button size="small" variant="danger" outline class="bulk-delete" ?disabled=${this.busy}
            @click=${this.#delete}><sl-icon slot="prefix" name="trash"></sl-icon>Delete…</sl-button>
        `
        : nothing}
      ${this.dialog === "move" ? this.#moveDialog(n) : nothing}
      ${this.dialog === "report" && this.report ? this.#reportDialog(this.report) : nothing}
    `;
  }

  #moveDialog(n: number): TemplateResult {
    const group = this.groups.find((g) => g.id === this.target);
    return html`
      <sl-dialog class="bulk-dialog bulk-move-dialog" label=${`Move ${nodes(n)} to a group`}
        @sl-after-hide=${whenHidden(() => this.dialog = "")}>
        <div class="form-grid">
          ${errorAlert(this.error)}
          <p>${someNames(this.#names)}.</p>
          <sl-select label="Node group" class="bulk-target" hoist required .value=${this.target}
            @sl-change=${(e: Event) => this.target = String((e.target as HTMLSelectElement).value)}>
            ${this.groups.map((g) => html`<sl-option value=${g.id}>${g.name}</sl-option>`)}
          </sl-select>
          <sl-checkbox class="bulk-keep" .checked=${this.keepOthers}
            @sl-change=${(e: Event) => this.keepOthers = (e.target as HTMLInputElement).checked}>
            Keep their other groups (add to the group instead of moving)</sl-checkbox>
          <p class="bulk-effects">${group
            ? `${nodes(n)} ${this.keepOthers ? "join" : "move to"} ${group.name}${
              this.keepOthers ? "" : " and leave every other group"
            }. They receive ${group.name}'s policies${
              this.keepOthers ? "" : " instead of their groups' "
            } when their agent next reconnects (membership changes reach agents on reconnect).`
            : "Choose the group."}</p>
        </div>
        <sl-button slot="footer" @click=${() => this.#close()}>Cancel</sl-button>
        <sl-button slot="footer" variant="primary" class="confirm-bulk-move" ?loading=${this.busy}
          ?disabled=${!group} @click=${this.#move}>${this.keepOthers ? "Add" : "Move"} ${nodes(n)}</sl-button>
      </sl-dialog>
    `;
  }

  #reportDialog(report: { title: string; answer: BulkAnswer; names: Map<string, string> }): TemplateResult {
    const { answer } = report;
    const name = (r: NodeResult) => report.names.get(r.node_id) ?? r.node_name;
    const total = answer.results.length;
    return html`
      <sl-dialog class="bulk-dialog bulk-report" label=${report.title} style="--width: 48rem"
        @sl-after-hide=${(e: Event) => {
          if (e.target !== e.currentTarget) return;
          this.dialog = "";
          this.dispatchEvent(new Event("bulk-done", { bubbles: true }));
        }}>
        <p class="bulk-summary" role="status">Done for ${answer.succeeded} of ${nodes(total)}${answer.failed
          ? `; ${answer.failed} failed (see below)`
          : ""}.</p>
        ${answer.results.some((r) => r.command)
          ? html`<sl-alert variant="warning" open>The tokens are shown only now; each works once and expires in 5
            minutes. Run each command on its node as root.</sl-alert>`
          : nothing}
        <div class="table-wrap">
          <table class="data bulk-results">
            <caption class="visually-hidden">Outcome per node</caption>
            <thead>
              <tr>
                <th scope="col">Node</th>
                <th scope="col">Outcome</th>
                <th scope="col">Details</th>
              </tr>
            </thead>
            <tbody>
              ${answer.results.map((r) =>
                html`
                  <tr data-node=${name(r)} data-ok=${String(r.ok)}>
                    <th scope="row">${name(r)}</th>
                    <td>${r.ok
                      ? html`<sl-badge variant="success" pill>Done</sl-badge>`
                      : html`<sl-badge variant="danger" pill>Failed</sl-badge>`}</td>
                    <td>${!r.ok ? r.error?.message : r.command
                      ? html`
                        <code class="bulk-command">${r.command}</code>
                        <sl-copy-button value=${r.command} copy-label=${`Copy the command for ${r.node_name}`}
                          success-label="Command copied">
                          <sl-icon slot="copy-icon" name="copy"
                            label=${`Copy the command for ${r.node_name}`}></sl-icon>
                        </sl-copy-button>
                      `
                      : r.joined
                      ? `In ${r.joined}${r.left?.length ? `; left ${r.left.join(", ")}` : ""}`
                      : "Deleted"}</td>
                  </tr>
                `
              )}
            </tbody>
          </table>
        </div>
        <sl-button slot="footer" variant="primary" class="close-report" @click=${() =>
          this.#close()}>Close</sl-button>
      </sl-dialog>
    `;
  }
}

customElements.define("svc-node-bulk", SvcNodeBulk);
