/**
 * Editor of the SessionAccess policy type: `<svc-session-access-form>` (`components/session_access_form.ts`),
 * the form generated from the content message and a weekly timeline of who may log in when, for the
 * policy alone or with a node group's SessionAccess policies, marking the hours nobody named may log in.
 */
import type { EditorSpec } from "./spec.ts";

/** The SessionAccess editor. */
export const sessionAccessEditor: EditorSpec = {
  hints: {},
  formTag: "svc-session-access-form",
};
