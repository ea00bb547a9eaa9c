/**
 * `PolicyFormElement`, the base of every custom policy form (`<svc-…-form>`, see `editors/spec.ts`): the
 * policy editor sets the same three properties on each (the content, its validation issues, read-only) and
 * listens for the same bubbling `value-change` event, so they are declared and sent here once.
 */
import { html, type PropertyDeclarations, type TemplateResult } from "lit";
import type { DescMessage } from "@bufbuild/protobuf";
import type { ValidationIssue } from "../../../shared/policy_types/mod.ts";
import type { JsonObject } from "../content.ts";
import type { FormHints } from "../editors/spec.ts";
import { boundProperties, LightElement } from "./light_element.ts";

/** A policy type's form: `value` in, `value-change` out, `issues` shown next to the fields they name. */
export class PolicyFormElement extends LightElement {
  static override properties: PropertyDeclarations = {
    readOnly: { type: Boolean, attribute: "read-only" },
    ...boundProperties("value", "issues"),
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

  /** Takes `value` as the form's content and tells the policy editor. */
  protected emitValue(value: JsonObject): void {
    this.value = value;
    this.dispatchEvent(new CustomEvent("value-change", { detail: value, bubbles: true, composed: true }));
  }

  /** The objects of the content's list `field` (none when it is missing). */
  protected listOf(field: string): JsonObject[] {
    const list = this.value[field];
    return Array.isArray(list) ? list as JsonObject[] : [];
  }

  /** Replaces the content's list `field`, keeping the rest of the content. */
  protected emitList(field: string, list: JsonObject[]): void {
    this.emitValue({ ...this.value, [field]: list });
  }

  /** The messages of the issues that name `field` (a path such as `scripts[0].name`), joined. */
  protected issueText(field: string): string {
    return this.issues.filter((i) => i.field === field).map((i) => i.message).join("; ");
  }

  /**
   * The form generated from `schema` over this form's content; its changes become this form's own
   * `value-change` (the caller imports `editors/schema_form.ts`, which defines `<svc-schema-form>`).
   */
  protected schemaForm(schema: DescMessage, hints: FormHints = {}): TemplateResult {
    return html`
      <svc-schema-form .schema=${schema} .value=${this.value} .issues=${this.issues} .hints=${hints}
        ?read-only=${this.readOnly} @value-change=${(e: CustomEvent<JsonObject>) => {
          e.stopPropagation();
          this.emitValue(e.detail);
        }}></svc-schema-form>
    `;
  }
}
