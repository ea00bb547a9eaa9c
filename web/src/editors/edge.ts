/** Editor of the Edge policy type: the form generated from its content message, plus what the type's shared rules know. */
import { EDGE_RULES } from "../../../shared/policy_types/edge.ts";
import type { EditorSpec } from "./spec.ts";

/** The Edge editor. */
export const edgeEditor: EditorSpec = {
  type: "Edge",
  hints: { enums: EDGE_RULES.enums, escapeHatch: "additional" },
};
