/**
 * Editor of the Certificates policy type: `<svc-certificates-form>` (`components/certificates_form.ts`), one card
 * per CA certificate showing its subject, SHA-256 fingerprint and expiry as the shared reader finds them.
 */
import type { EditorSpec } from "./spec.ts";

/** The Certificates editor. */
export const certificatesEditor: EditorSpec = {
  hints: {},
  formTag: "svc-certificates-form",
};
