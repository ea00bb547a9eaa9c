/** Editor of the Dconf policy type: the form generated from its content message (its .proto comments supply labels, help and allowed values). */
import type { EditorSpec } from "./spec.ts";

/** The Dconf editor. */
export const dconfEditor: EditorSpec = {
  type: "Dconf",
  hints: {},
};
