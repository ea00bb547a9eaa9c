/** Editor of the Chrome policy type: the form generated from its content message, plus what the type's shared rules know. */
import { CHROME_RULES } from "../../../shared/policy_types/chrome.ts";
import type { EditorSpec } from "./spec.ts";

/** The Chrome editor. */
export const chromeEditor: EditorSpec = {
  type: "Chrome",
  hints: { enums: CHROME_RULES.enums, escapeHatch: "additional" },
};
