/** Editor of the Firefox policy type: the form generated from its content message, labelled, grouped and constrained by the type's catalogue in the shared registry. */
import { firefoxType } from "../../../shared/policy_types/firefox.ts";
import { browserHints, type EditorSpec } from "./spec.ts";

/** The Firefox editor. */
export const firefoxEditor: EditorSpec = {
  hints: browserHints(firefoxType),
};
