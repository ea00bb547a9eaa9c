/**
 * The editors of the known policy types (registry.gen.ts, written by `deno task proto` from the editor modules
 * that exist). A type without an editor still gets the generated form when the shared registry knows its
 * message (with its catalogue when it is a browser type), and the JSON view otherwise.
 */
import { isBrowserType } from "../../../shared/policy_types/browser.ts";
import { getPolicyType } from "../../../shared/policy_types/mod.ts";
import { browserHints, type EditorSpec } from "./spec.ts";
import { EDITORS } from "./registry.gen.ts";

export type { EditorSpec } from "./spec.ts";

/**
 * The editor of a type; for a type without its own file, one built from the registry (the catalogue of a
 * browser type, no hints otherwise).
 */
export function editorFor(type: string): EditorSpec {
  const own = EDITORS.get(type);
  if (own) return own;
  const def = getPolicyType(type);
  return { hints: isBrowserType(def) ? browserHints(def) : {} };
}
