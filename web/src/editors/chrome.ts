/** Editor of the Chrome policy type: the form generated from its content message, labelled, grouped and constrained by the type's catalogue in the shared registry. */
import { chromeType } from "../../../shared/policy_types/chrome.ts";
import { browserHints, type EditorSpec } from "./spec.ts";

/** The Chrome editor. */
export const chromeEditor: EditorSpec = {
  hints: browserHints(chromeType),
};
