/** Editor of the Kconfig policy type: the form generated from its content message (its .proto comments supply labels, help and allowed values). */
import type { EditorSpec } from "./spec.ts";

/** The Kconfig editor. */
export const kconfigEditor: EditorSpec = {
  type: "Kconfig",
  hints: {},
};
