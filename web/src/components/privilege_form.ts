/**
 * `<svc-privilege-form>`, the Privilege policy editor's form (see `editors/privilege.ts`): the form generated from
 * the content message and, below it, what this policy alone makes of a Debian node: the sudoers lines and the polkit
 * administrator rule, rendered by the agent's own code (`shared/privilege_rules.ts`, `shared/polkit_js.ts`).
 */
import { html, LitElement } from "lit";
import { PrivilegePolicySchema } from "../../../shared/gen/svc/policy/v1/privilege_pb.ts";
import { SUDOERS_PATH } from "../../../shared/privilege_rules.ts";
import { POLKIT_ADMIN_RULES_PATH } from "../../../shared/polkit_js.ts";
import type { ValidationIssue } from "../../../shared/policy_types/mod.ts";
import type { JsonObject } from "../content.ts";
import { PRIVILEGE_MERGE_RULE, privilegeEditor, privilegePreview } from "../editors/privilege.ts";
import "../editors/schema_form.ts";

class SvcPrivilegeForm extends LitElement {
  static override properties = {
    value: { attribute: false },
    issues: { attribute: false },
    readOnly: { type: Boolean, attribute: "read-only" },
  };
  declare value: JsonObject;
  declare issues: ValidationIssue[];
  declare readOnly: boolean;

  constructor() {
    super();
    this.value = {};
    this.issues = [];
    this.readOnly = false;
  }

  protected override createRenderRoot(): HTMLElement {
    return this;
  }

  override render() {
    const preview = privilegePreview(this.value);
    return html`
      <p class="muted privilege-merge">${PRIVILEGE_MERGE_RULE}</p>
      <svc-schema-form .schema=${PrivilegePolicySchema} .value=${this.value} .issues=${this.issues}
        .hints=${privilegeEditor.hints} ?read-only=${this.readOnly}
        @value-change=${(e: CustomEvent<JsonObject>) => {
          e.stopPropagation();
          this.value = e.detail;
          this.dispatchEvent(
            new CustomEvent("value-change", { detail: e.detail, bubbles: true, composed: true }),
          );
        }}></svc-schema-form>
      <section class="card privilege-preview-card" aria-label="What a node gets">
        <h3>What a Debian node gets from this policy alone</h3>
        ${"problem" in preview
          ? html`<p class="muted privilege-preview-problem">${preview.problem}</p>`
          : html`
            <p class="muted">${SUDOERS_PATH} (checked with visudo before it lands)</p>
            <pre class="privilege-preview-sudoers"><code>${preview.sudoers}</code></pre>
            <p class="muted">${POLKIT_ADMIN_RULES_PATH}</p>
            <pre class="privilege-preview-polkit"><code>${preview.polkit}</code></pre>
          `}
      </section>
    `;
  }
}

customElements.define("svc-privilege-form", SvcPrivilegeForm);
