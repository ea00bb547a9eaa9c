/**
 * Compliance item rows as an admin reads them: a browser setting by the label its editor shows
 * ("Disable telemetry") with the policy key as secondary text, and enum constants in the agent's message
 * preceded by the label the editor gives them ("Drop (FIREWALLD_TARGET_DROP)"). Types whose items are not
 * catalogue settings (rules, zones, dconf keys) keep their key as the title.
 */
import { getPolicyType } from "../../shared/policy_types/mod.ts";
import { isBrowserType } from "../../shared/policy_types/browser.ts";
import { labelEnumConstants } from "./editors/enum_labels.ts";

/** How one item row names its setting. */
export interface ItemTitle {
  /** What the row is called: the catalogue label, or the key when there is none. */
  title: string;
  /** The key (with its schema for dconf) as secondary text; empty when it is already the title. */
  key: string;
}

/** The title and key text of item `key` (`schemaId` for dconf) of a policy of `type`. */
export function itemTitle(type: string, schemaId: string, key: string): ItemTitle {
  const full = schemaId ? `${schemaId}/${key}` : key;
  const def = getPolicyType(type);
  if (def && isBrowserType(def)) {
    // Nested keys (`Homepage.URL`) are labelled by their top-level setting.
    const top = key.split(/[./]/, 1)[0];
    const label = def.fieldInfo[key]?.label ?? def.fieldInfo[top]?.label;
    if (label) return { title: label, key: full };
  }
  return { title: full, key: "" };
}

/** The agent's message about an item of a policy of `type`, with enum constants labelled. */
export function itemMessage(type: string, message: string): string {
  const def = getPolicyType(type);
  return def && message ? labelEnumConstants(def.schema, message) : message;
}
