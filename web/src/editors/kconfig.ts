/**
 * Editor of the Kconfig policy type: the form generated from its content message, whose .proto comments supply
 * labels and help (entries with file, nested groups, key, value and immutability; action and resource
 * restrictions as key/value rows; URL rules; hidden System Settings modules one per line).
 */
import type { EditorSpec } from "./spec.ts";

/** The Kconfig editor. */
export const kconfigEditor: EditorSpec = {
  hints: {},
};
