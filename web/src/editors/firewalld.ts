/** Editor of the Firewalld policy type: the form generated from its content message (its .proto comments supply labels, help and allowed values). */
import type { EditorSpec } from "./spec.ts";

/** The Firewalld editor. */
export const firewalldEditor: EditorSpec = {
  type: "Firewalld",
  hints: {},
};
