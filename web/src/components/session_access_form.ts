/**
 * `<svc-session-access-form>`, the SessionAccess policy editor's form (see `editors/session_access.ts`): the
 * form generated from the content message, and under it `<svc-session-timeline>`, who may log in when
 * during a week — for this policy alone, or with the SessionAccess policies already reaching a chosen node
 * group. Hours in which none of the named accounts may log in are marked; the server refuses to release
 * or bind such a policy without a reason (the lockout guard).
 */
import { html, nothing } from "lit";
import { SessionAccessPolicySchema } from "../../../shared/gen/svc/policy/v1/session_access_pb.ts";
import { formatWeekMinute, WEEKDAY_NAMES } from "../../../shared/session_access_rules.ts";
import { api } from "../api.ts";
import type { JsonObject } from "../content.ts";
import { errorAlert } from "./ui.ts";
import { errorText } from "./page.ts";
import { labelEnumConstants } from "../editors/enum_labels.ts";
import { accountLabel } from "../lockout_text.ts";
import "../editors/schema_form.ts";
import { PolicyFormElement } from "./policy_form_element.ts";
import { LightElement, stateProperties } from "./light_element.ts";

/** `GET /api/v1/session-access/timeline`. */
interface Timeline {
  view_zone: string;
  timeline: { subject: string; allowed: { from: number; to: number }[] }[];
  lockouts: { from: number; to: number }[];
}

const DAY = 1440;

class SvcSessionTimeline extends LightElement {
  static override properties = {
    content: { attribute: false },
    ...stateProperties("groups", "groupId", "data", "error"),
  };
  declare content: JsonObject;
  declare groups: { id: string; name: string }[];
  declare groupId: string;
  declare data: Timeline | undefined;
  declare error: unknown;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #asked = "";

  constructor() {
    super();
    this.content = {};
    this.groups = [];
    this.groupId = "";
  }

  override connectedCallback(): void {
    super.connectedCallback();
    api.call("GET /api/v1/node-groups", { query: { per_page: 200 } })
      .then((page) => this.groups = page.items, () => {});
  }

  protected override updated(): void {
    const ask = JSON.stringify([this.content, this.groupId]);
    if (ask === this.#asked) return;
    this.#asked = ask;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#load(), 300);
  }

  async #load(): Promise<void> {
    const rules = Array.isArray(this.content.rules) ? this.content.rules : [];
    if (rules.length === 0) {
      this.data = undefined;
      this.error = undefined;
      return;
    }
    try {
      this.data = await api.call("GET /api/v1/session-access/timeline", {
        query: { content: JSON.stringify(this.content), node_group_id: this.groupId || undefined },
      });
      this.error = undefined;
    } catch (err) {
      // The server names enum values by their constants (for scripts); the form shows their labels.
      this.error = new Error(labelEnumConstants(SessionAccessPolicySchema, errorText(err)));
    }
  }

  #bar(ranges: { from: number; to: number }[], day: number, className: string) {
    return ranges.filter((r) => r.to > day * DAY && r.from < (day + 1) * DAY).map((r) => {
      const from = Math.max(r.from, day * DAY) - day * DAY;
      const to = Math.min(r.to, (day + 1) * DAY) - day * DAY;
      return html`
        <span class=${className} style=${`left:${(from / DAY) * 100}%;width:${((to - from) / DAY) * 100}%`}
          title=${`${formatWeekMinute(day * DAY + from)}–${formatWeekMinute(day * DAY + to)}`}></span>
      `;
    });
  }

  override render() {
    const data = this.data;
    return html`
      <section class="card session-timeline" aria-label="Who may log in when">
        <h3>Who may log in when</h3>
        <sl-select class="session-group" label="Together with the policies of node group" hoist clearable
          .value=${this.groupId} placeholder="This policy alone"
          @sl-change=${(e: Event) => this.groupId = String((e.target as HTMLSelectElement).value ?? "")}>
          ${this.groups.map((g) => html`<sl-option value=${g.id}>${g.name}</sl-option>`)}
        </sl-select>
        ${errorAlert(this.error)}
        ${!data ? html`<p class="muted">Add a rule to see the week.</p>` : html`
          ${data.lockouts.length
            ? html`<sl-alert variant="warning" open class="session-lockout">
                <sl-icon slot="icon" name="exclamation-triangle"></sl-icon>
                No named account may log in: ${
              data.lockouts.slice(0, 6).map((r) => `${formatWeekMinute(r.from)}–${formatWeekMinute(r.to)}`)
                .join(", ")
            }${data.lockouts.length > 6 ? ` and ${data.lockouts.length - 6} more` : ""}
                (${data.view_zone}). Releasing or binding needs a reason.
              </sl-alert>`
            : html`<p class="session-ok">At every time of the week at least one named account may log in.</p>`}
          <table class="session-week">
            <caption>Allowed times per account (${data
              .view_zone}); red marks hours when nobody named may log in</caption>
            <thead>
              <tr><th scope="col">Account</th>${WEEKDAY_NAMES.map((d) =>
                html`<th scope="col">${d.slice(0, 3)}</th>`
              )}</tr>
            </thead>
            <tbody>
              ${data.timeline.map((row) =>
                html`
                  <tr data-subject=${row.subject}>
                    <th scope="row">${accountLabel(row.subject)}</th>
                    ${WEEKDAY_NAMES.map((_, day) =>
                      html`
                        <td>
                          <div class="session-day">
                                            ${this.#bar(row.allowed, day, "session-allowed")}${this.#bar(
                                              data.lockouts,
                                              day,
                                              "session-locked",
                                            )}
                                          </div>
                        </td>
                      `
                    )}
                  </tr>
                `
              )}
            </tbody>
          </table>
        `}
      </section>
    `;
  }
}

class SvcSessionAccessForm extends PolicyFormElement {
  override render() {
    return html`
      ${this.schemaForm(SessionAccessPolicySchema)}
      ${this.value ? html`<svc-session-timeline .content=${this.value}></svc-session-timeline>` : nothing}
    `;
  }
}

customElements.define("svc-session-timeline", SvcSessionTimeline);
customElements.define("svc-session-access-form", SvcSessionAccessForm);
