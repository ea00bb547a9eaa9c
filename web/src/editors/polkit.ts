/** Editor of the Polkit policy type: the form generated from its content message (its .proto comments supply labels, help and allowed values). */
import type { EditorSpec } from "./spec.ts";

/** The Polkit editor. */
export const polkitEditor: EditorSpec = {
  type: "Polkit",
  hints: {},
};
