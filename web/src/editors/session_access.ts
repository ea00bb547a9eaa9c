/** Editor of the SessionAccess policy type: the form generated from its content message (its .proto comments supply labels, help and allowed values). */
import type { EditorSpec } from "./spec.ts";

/** The SessionAccess editor. */
export const sessionAccessEditor: EditorSpec = {
  type: "SessionAccess",
  hints: {},
};
