/** Editor of the Thunderbird policy type: the form generated from its content message, labelled, grouped and constrained by the type's catalogue in the shared registry. */
import { thunderbirdType } from "../../../shared/policy_types/thunderbird.ts";
import { browserHints, type EditorSpec } from "./spec.ts";

/** The Thunderbird editor. */
export const thunderbirdEditor: EditorSpec = {
  hints: browserHints(thunderbirdType),
};
