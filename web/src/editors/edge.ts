/** Editor of the Edge policy type: the form generated from its content message, labelled, grouped and constrained by the type's catalogue in the shared registry. */
import { edgeType } from "../../../shared/policy_types/edge.ts";
import { browserHints, type EditorSpec } from "./spec.ts";

/** The Edge editor. */
export const edgeEditor: EditorSpec = {
  hints: browserHints(edgeType),
};
