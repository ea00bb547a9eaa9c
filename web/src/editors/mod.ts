/**
 * The editors of the known policy types. A type without an entry here still gets the generated form when
 * the shared registry knows its message, and the JSON view otherwise.
 */
import type { EditorSpec } from "./spec.ts";
import { chromeEditor } from "./chrome.ts";
import { dconfEditor } from "./dconf.ts";
import { diskEncryptionEditor } from "./disk_encryption.ts";
import { edgeEditor } from "./edge.ts";
import { firefoxEditor } from "./firefox.ts";
import { firewalldEditor } from "./firewalld.ts";
import { flatpakEditor } from "./flatpak.ts";
import { kconfigEditor } from "./kconfig.ts";
import { polkitEditor } from "./polkit.ts";
import { sessionAccessEditor } from "./session_access.ts";
import { thunderbirdEditor } from "./thunderbird.ts";

export type { EditorSpec } from "./spec.ts";

const EDITORS: readonly EditorSpec[] = [
  firefoxEditor,
  thunderbirdEditor,
  chromeEditor,
  edgeEditor,
  dconfEditor,
  firewalldEditor,
  polkitEditor,
  flatpakEditor,
  sessionAccessEditor,
  diskEncryptionEditor,
  kconfigEditor,
];

/** The editor of a type, or a plain one (no hints) for a type without its own file. */
export function editorFor(type: string): EditorSpec {
  return EDITORS.find((e) => e.type === type) ?? { type, hints: {} };
}
