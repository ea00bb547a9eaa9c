/**
 * `<svc-privilege-form>`, the Privilege policy editor's form (see `editors/privilege.ts`): the form generated from
 * the content message and, below it, what this policy alone makes of a Debian node: the sudoers lines and the polkit
 * administrator rule, rendered by the agent's own code (`shared/privilege_rules.ts`, `shared/polkit_js.ts`).
 */
import { html } from "lit";
import { PrivilegePolicySchema } from "../../../shared/gen/svc/policy/v1/privilege_pb.ts";
import { SUDOERS_PATH } from "../../../shared/privilege_rules.ts";
import { POLKIT_ADMIN_RULES_PATH } from "../../../shared/polkit_js.ts";
import { PRIVILEGE_MERGE_RULE, privilegeEditor, privilegePreview } from "../editors/privilege.ts";
import "../editors/schema_form.ts";
import { PolicyFormElement } from "./policy_form_element.ts";

class SvcPrivilegeForm extends PolicyFormElement {
  override render() {
    const preview = privilegePreview(this.value);
    return html`
      <p class="muted privilege-merge">${PRIVILEGE_MERGE_RULE}</p>
      ${this.schemaForm(PrivilegePolicySchema, privilegeEditor.hints)}
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
