/** Editor of the Flatpak policy type: the form generated from its content message (its .proto comments supply labels, help and allowed values). */
import type { EditorSpec } from "./spec.ts";

/** The Flatpak editor. */
export const flatpakEditor: EditorSpec = {
  type: "Flatpak",
  hints: {},
};
