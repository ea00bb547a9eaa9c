/**
 * Editor of the Flatpak policy type: `<svc-flatpak-form>` (`components/flatpak_form.ts`), the form generated
 * from the content message with a search of the server's Flatpak catalogue (icon, name, id) that adds
 * applications.
 */
import type { EditorSpec } from "./spec.ts";

/** The Flatpak editor. */
export const flatpakEditor: EditorSpec = {
  hints: {},
  formTag: "svc-flatpak-form",
};
