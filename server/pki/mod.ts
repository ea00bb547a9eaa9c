/**
 * Public key infrastructure of svc-server: the internal CA, agent certificate
 * signing and the server's TLS certificate.
 *
 * @module
 */

export { type Ca, loadOrCreateCa, type LoadOrCreateCaOptions } from "./ca.ts";
export { PkiError } from "./errors.ts";
export type { CaCredentials } from "./issue.ts";
export {
  AGENT_CERT_VALIDITY_DAYS,
  signCsr,
  type SignCsrOptions,
  type SignedCertificate,
  validateCommonName,
} from "./sign_csr.ts";
export {
  ensureInternalServerCert,
  type InternalServerCertOptions,
  loadOrCreateServerCert,
  type ServerCert,
  type ServerCertOptions,
} from "./server_cert.ts";
