/**
 * Editor of the Scripts policy type: `<svc-scripts-form>` (`components/scripts_form.ts`), a form of its own with a
 * highlighting script editor, a "run again" action, and the warning that scripts are powerful. Creating or editing a
 * Scripts policy needs the permission `policy:edit_scripts`; the server checks every script with `bash -n` (or
 * `sh -n`) when the policy is saved and signs the scripts when it is released.
 */
import type { EditorSpec } from "./spec.ts";

/** The Scripts editor. */
export const scriptsEditor: EditorSpec = {
  hints: {},
  formTag: "svc-scripts-form",
};
