/** Editor of the DiskEncryption policy type: the form generated from its content message (its .proto comments supply labels, help and allowed values). */
import type { EditorSpec } from "./spec.ts";

/** The DiskEncryption editor. */
export const diskEncryptionEditor: EditorSpec = {
  type: "DiskEncryption",
  hints: {},
};
