/** Editor of the Thunderbird policy type: the form generated from its content message, plus what the type's shared rules know. */
import { THUNDERBIRD_RULES } from "../../../shared/policy_types/thunderbird.ts";
import type { EditorSpec } from "./spec.ts";

/** The Thunderbird editor. */
export const thunderbirdEditor: EditorSpec = {
  type: "Thunderbird",
  hints: { enums: THUNDERBIRD_RULES.enums, escapeHatch: "additional" },
};
