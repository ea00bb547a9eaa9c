/**
 * Editor of the Polkit policy type: `<svc-polkit-form>` (`components/polkit_form.ts`), the form generated from
 * the content message with an action picker over the server's polkit catalogue (ids, prefixes, implicit
 * defaults) and a preview of the generated rules file. It states the priority rule: a higher binding priority
 * is evaluated first and wins.
 */
import type { EditorSpec } from "./spec.ts";

/** The Polkit editor. */
export const polkitEditor: EditorSpec = {
  hints: {},
  formTag: "svc-polkit-form",
};
