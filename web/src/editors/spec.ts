/** What a policy type's editor adds to the form generated from its content message. */
import type { TemplateResult } from "lit";
import type { BrowserTypeDef } from "../../../shared/policy_types/browser.ts";
import type { ValidationIssue } from "../../../shared/policy_types/mod.ts";
import type { JsonObject } from "../content.ts";
import type { FormCatalogue } from "./form_model.ts";

/** Hints for the generated form. */
export interface FormHints {
  /**
   * A browser type's catalogue from the shared registry: groups, labels, descriptions, allowed values with
   * labels, ranges and badges. Without it the form falls back to the .proto comments.
   */
  catalogue?: FormCatalogue;
  /** json_name of the free-form escape hatch (`additional`), shown last in its own group. */
  escapeHatch?: string;
}

/** One editor per policy type (`web/src/editors/<type>.ts`). */
export interface EditorSpec {
  /** Wire name of the type. */
  type: string;
  /** Hints for the generated form (catalogue, escape hatch). */
  hints: FormHints;
  /**
   * A form of the type's own that replaces the generated one (e.g. Dconf's catalogue picker). It must call
   * `onChange` with a `value-change` event carrying the new content.
   */
  form?: (props: TypeFormProps) => TemplateResult;
}

/** What the policy editor hands a type's own form. */
export interface TypeFormProps {
  value: JsonObject;
  issues: ValidationIssue[];
  readOnly: boolean;
  onChange: (e: CustomEvent<JsonObject>) => void;
}

/** The hints of a browser type: its catalogue and its `additional` escape hatch. */
export function browserHints(def: Pick<BrowserTypeDef, "groups" | "fieldInfo">): FormHints {
  return { catalogue: { groups: def.groups, fieldInfo: def.fieldInfo }, escapeHatch: "additional" };
}
