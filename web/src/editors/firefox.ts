/** Editor of the Firefox policy type: the form generated from its content message, plus what the type's shared rules know. */
import { FIREFOX_RULES } from "../../../shared/policy_types/firefox.ts";
import type { EditorSpec } from "./spec.ts";

/** The Firefox editor. */
export const firefoxEditor: EditorSpec = {
  type: "Firefox",
  hints: { enums: FIREFOX_RULES.enums, escapeHatch: "additional" },
};
