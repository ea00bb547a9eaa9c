/**
 * `<svc-provenance>`: the node's effective settings for every type merged by priority — winning value, the
 * policy and binding that set it, and what it overrode. Types that write one file per policy or compile a
 * union have no winner per key; they are listed with a pointer to the compliance tab.
 */
import { html, nothing, type TemplateResult } from "lit";
import { api, ApiError } from "../api.ts";
import { session } from "../session.ts";
import { getPolicyType } from "../../../shared/policy_types/mod.ts";
import { contentToValue } from "../content.ts";
import { computeProvenance, type ProvenancePolicy, type SettingProvenance } from "../provenance.ts";
import { errorText } from "./page.ts";
import { boundProperties, LightElement, stateProperties } from "./light_element.ts";
import { statusBadge } from "./ui.ts";
import type { ComplianceRow, NodeDetail } from "../api_types.ts";

function show(value: unknown): string {
  if (value === undefined) return "—";
  const text = JSON.stringify(value);
  return text.length > 120 ? `${text.slice(0, 117)}…` : text;
}

class SvcProvenance extends LightElement {
  static override properties = {
    ...boundProperties("node", "results"),
    ...stateProperties("rows", "other", "error"),
  };
  declare node: NodeDetail;
  declare results: ComplianceRow[];
  declare rows: SettingProvenance[] | undefined;
  declare other: ComplianceRow[];
  declare error: unknown;

  constructor() {
    super();
    this.results = [];
    this.other = [];
  }

  override updated(changed: Map<string, unknown>): void {
    if (changed.has("results") || changed.has("node")) void this.#load();
  }

  async #load(): Promise<void> {
    this.rows = undefined;
    this.error = undefined;
    const merged = this.results.filter((r) => getPolicyType(r.policy_type)?.merge === "priority_merge");
    this.other = this.results.filter((r) => getPolicyType(r.policy_type)?.merge !== "priority_merge");
    if (!session.can("policy:view") || !session.can("binding:view")) {
      this.error = new Error("Showing provenance needs the policy:view and binding:view permissions.");
      return;
    }
    try {
      const bindings = (await Promise.all(this.node.groups.map((g) =>
        api.call("GET /api/v1/policy-bindings", {
          query: { node_group_id: g.id, state: "enabled", per_page: 200 },
        })
      ))).flatMap((p) =>
        p.items
      );
      const policies = await Promise.all(
        merged.map((r) => api.call("GET /api/v1/policies/all/{id}", { path: { id: r.policy_id } })),
      );
      const input: ProvenancePolicy[] = merged.map((r, i) => {
        const best = bindings.filter((b) => b.policy_id === r.policy_id)
          .sort((a, b) => b.priority - a.priority || a.node_group_name.localeCompare(b.node_group_name))[0];
        return {
          id: r.policy_id,
          name: r.policy_name,
          type: r.policy_type,
          priority: best?.priority ?? 0,
          binding: best ? { id: best.id, nodeGroupName: best.node_group_name } : undefined,
          content: contentToValue(r.policy_type, policies[i].content ?? "").value,
          items: r.items,
        };
      });
      this.rows = computeProvenance(input);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 401)) this.error = err;
    }
  }

  override render() {
    if (this.error) return html`<sl-alert variant="warning" open>${errorText(this.error)}</sl-alert>`;
    if (!this.rows) return html`<sl-spinner></sl-spinner>`;
    const types = [...new Set(this.rows.map((r) => r.type))];
    return html`
      <p class="muted">For types merged by priority: which policy's value is in force for each key, through which
        binding, and which lower-priority values it overrode.</p>
      ${types.length === 0
        ? html`<p class="muted">No policy merged by priority reaches this node.</p>`
        : nothing}
      ${types.map((t) => this.#type(t, this.rows!.filter((r) => r.type === t)))}
      ${this.other.length
        ? html`<p class="muted">Also applied, without a winner per key (one file per policy, or a union):
          ${this.other.map((r) => r.policy_name).join(", ")} — see the Compliance tab.</p>`
        : nothing}
    `;
  }

  #type(type: string, rows: SettingProvenance[]): TemplateResult {
    return html`
      <h3>${type}</h3>
      <div class="table-wrap">
        <table class="data provenance" data-type=${type}>
          <caption class="visually-hidden">Effective ${type} settings</caption>
          <thead>
            <tr>
              <th scope="col">Key</th>
              <th scope="col">Value in force</th>
              <th scope="col">Set by</th>
              <th scope="col">Status</th>
              <th scope="col">Overrode</th>
            </tr>
          </thead>
          <tbody>
            ${rows.map((r) =>
              html`
                <tr data-key=${r.key}>
                  <th scope="row"><code>${r.key}</code></th>
                  <td><code>${show(r.winner.value)}</code></td>
                  <td>
                    <a href=${`/policies/${r.winner.policy.id}/edit`}>${r.winner.policy.name}</a>
                    <div class="muted">${r.winner.policy.binding
                      ? `binding to ${r.winner.policy.binding.nodeGroupName}, priority ${r.winner.policy.priority}`
                      : "no enabled binding found"}${r.reported ? "" : " · predicted, not reported yet"}</div>
                  </td>
                  <td>${statusBadge(r.winner.status)}</td>
                  <td>${r.overridden.length === 0 ? html`<span class="muted">nothing</span>` : html`<ul>
                  ${
                    r.overridden.map((o) =>
                      html`<li>${o.policy.name} (priority ${o.policy.priority}): <code>${
                        show(o.value)
                      }</code></li>`
                    )
                  }</ul>`}</td>
                </tr>
              `
            )}
          </tbody>
        </table>
      </div>
    `;
  }
}

customElements.define("svc-provenance", SvcProvenance);
