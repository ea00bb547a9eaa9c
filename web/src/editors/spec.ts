/** What a policy type's editor adds to the form generated from its content message. */
import type { BrowserTypeDef } from "../../../shared/policy_types/browser.ts";
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

/**
 * One editor per policy type: `web/src/editors/<type>.ts` exporting `<type>Editor` (e.g. `kconfigEditor`), found by
 * `deno task proto` (registry.gen.ts) under the base name of the type's typed_content member.
 */
export interface EditorSpec {
  /** Hints for the generated form (catalogue, escape hatch). */
  hints: FormHints;
  /**
   * Tag of a custom element of the type's own that replaces the generated form (e.g. Dconf's catalogue
   * picker), defined by `web/src/components/<type>_form.ts` (forms.gen.ts loads it for the policy editor). It takes `.value`, `.issues` and `read-only` like `<svc-schema-form>` and fires `value-change`.
   */
  formTag?: string;
}

/** The hints of a browser type: its catalogue and its `additional` escape hatch. */
export function browserHints(def: Pick<BrowserTypeDef, "groups" | "fieldInfo">): FormHints {
  return { catalogue: { groups: def.groups, fieldInfo: def.fieldInfo }, escapeHatch: "additional" };
}
