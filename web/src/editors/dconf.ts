/**
 * Editor of the Dconf policy type: its own form, `<svc-dconf-form>` (`components/dconf_form.ts`), instead of
 * the generated one: keys are picked from the GSettings catalogue and each gets the control its type calls for.
 */
import type { EditorSpec } from "./spec.ts";

/** The Dconf editor. */
export const dconfEditor: EditorSpec = {
  hints: {},
  formTag: "svc-dconf-form",
};
