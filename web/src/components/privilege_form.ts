/**
 * `<svc-privilege-form>`, the Privilege policy editor's form (see `editors/privilege.ts`): the form generated from
 * the content message and, below it, what this policy alone makes of a Debian node: the sudoers lines and the polkit
 * administrator rule, rendered by the agent's own code (`shared/privilege_rules.ts`, `shared/polkit_js.ts`).
 */
import { html, LitElement } from "lit";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { PrivilegePolicySchema } from "../../../shared/gen/svc/policy/v1/privilege_pb.ts";
import {
  administrators,
  mergePrivilege,
  renderSudoers,
  SUDOERS_PATH,
} from "../../../shared/privilege_rules.ts";
import { POLKIT_ADMIN_RULES_PATH, renderPolkitAdminRule } from "../../../shared/polkit_js.ts";
import type { ValidationIssue } from "../../../shared/policy_types/mod.ts";
import type { JsonObject } from "../content.ts";
import { privilegeEditor } from "../editors/privilege.ts";
import "../editors/schema_form.ts";

/** The merge rule, stated once for the editor (the admin guide says the same). */
export const PRIVILEGE_MERGE_RULE =
  "Per user or group, the policy bound with the higher priority decides; at equal priority deny beats allow. " +
  "A revoked group also revokes members allowed by name, and the server refuses a set that would leave a node " +
  "group without an administrator unless you give a reason.";

/** The sudoers text and polkit rule this content alone makes on a node whose sudo group is `sudo`. */
export function privilegePreview(
  value: JsonObject,
): { sudoers: string; polkit: string } | { problem: string } {
  try {
    const content = fromJson(PrivilegePolicySchema, value as JsonValue, { ignoreUnknownFields: true });
    if (content.entries.length === 0 && !content.localSudoGroupNotAdmin) {
      return { problem: "Add an entry to see what the node gets." };
    }
    const merge = mergePrivilege([{ id: "this", name: "this policy", priority: 0, content }]);
    const admins = administrators(merge, ["sudo"]).map((a) => `unix-${a.kind}:${a.name}`);
    return {
      sudoers: renderSudoers(merge, ["sudo"]),
      polkit: renderPolkitAdminRule(admins.length ? admins : ["unix-user:root"]),
    };
  } catch (err) {
    return { problem: `Complete the entries to see what the node gets (${(err as Error).message}).` };
  }
}

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
