/**
 * The editors of the known policy types. A type without an entry here still gets the generated form when
 * the shared registry knows its message (with its catalogue when it is a browser type), and the JSON view
 * otherwise.
 */
import { isBrowserType } from "../../../shared/policy_types/browser.ts";
import { getPolicyType } from "../../../shared/policy_types/mod.ts";
import { browserHints, type EditorSpec } from "./spec.ts";
import { chromeEditor } from "./chrome.ts";
import { dconfEditor } from "./dconf.ts";
import { diskEncryptionEditor } from "./disk_encryption.ts";
import { edgeEditor } from "./edge.ts";
import { firefoxEditor } from "./firefox.ts";
import { firewalldEditor } from "./firewalld.ts";
import { flatpakEditor } from "./flatpak.ts";
import { kconfigEditor } from "./kconfig.ts";
import { polkitEditor } from "./polkit.ts";
import { privilegeEditor } from "./privilege.ts";
import { scriptsEditor } from "./scripts.ts";
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
  privilegeEditor,
  scriptsEditor,
];

/**
 * The editor of a type; for a type without its own file, one built from the registry (the catalogue of a
 * browser type, no hints otherwise).
 */
export function editorFor(type: string): EditorSpec {
  const own = EDITORS.find((e) => e.type === type);
  if (own) return own;
  const def = getPolicyType(type);
  return { type, hints: isBrowserType(def) ? browserHints(def) : {} };
}
