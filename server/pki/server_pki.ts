/**
 * Everything PKI a server process needs at start, in one place for the main process and the policy
 * workers: the shared CA, the web-port and policy-port certificates, the key sealing TOTP secrets, and the
 * configuration with the shared session secret filled in when `security.jwt_secret` is empty.
 *
 * @module
 */
import { join } from "node:path";
import type { ServerConfig } from "../config/config.ts";
import type { Db } from "../db/db.ts";
import type { Ca } from "./ca.ts";
import { type CaOrigin, loadSharedCa, loadSharedJwtSecret, loadSharedTotpKey } from "./ca_store.ts";
import { openSecretStore, type SecretStore } from "./secret_store.ts";
import { ensureInternalServerCert, loadOrCreateServerCert, type ServerCert } from "./server_cert.ts";

/** What {@linkcode openServerPki} returns. */
export interface ServerPki {
  /** `config`, with `security.jwtSecret` set to the shared secret when it was empty. */
  config: ServerConfig;
  ca: Ca;
  caOrigin: CaOrigin;
  webCert: ServerCert;
  internalCert: ServerCert;
  /** The sealed secrets in the database (also where ACME keeps its certificate). */
  store: SecretStore;
  /** The key sealing TOTP secrets at rest ({@linkcode loadSharedTotpKey}). */
  totpKey: Uint8Array<ArrayBuffer>;
}

/** The key file sealing the server's secrets: `ca.key_encryption_key_file`, else `{data_dir}/pki/secrets.kek`. */
export function secretsKeyFile(config: ServerConfig): string {
  return config.ca.keyEncryptionKeyFile || join(config.server.dataDir, "pki", "secrets.kek");
}

/** Loads (or, on the first start of the first replica, creates) the PKI of a server process. */
export async function openServerPki(config: ServerConfig, db: Db): Promise<ServerPki> {
  const store = openSecretStore({ db, path: secretsKeyFile(config) });
  const { ca, origin } = await loadSharedCa({
    store,
    dataDir: config.server.dataDir,
    certFile: config.ca.certFile || undefined,
    keyFile: config.ca.keyFile || undefined,
    keyType: config.ca.keyType,
  });
  const effective = config.security.jwtSecret ? config : {
    ...config,
    security: { ...config.security, jwtSecret: await loadSharedJwtSecret(store) },
  };
  const hostnames = config.server.hostnames;
  const webCert = await loadOrCreateServerCert(ca, {
    dataDir: config.server.dataDir,
    hostnames,
    certFile: config.tls.certFile || undefined,
    keyFile: config.tls.keyFile || undefined,
  });
  const issued = await ensureInternalServerCert(ca, { dataDir: config.server.dataDir, hostnames });
  // Under an intermediate CA the server presents the chain up to (not including) the root agents pin.
  const internalCert = { ...issued, certPem: issued.certPem + ca.chainPem };
  return {
    config: effective,
    ca,
    caOrigin: origin,
    webCert: config.tls.certFile ? webCert : { ...webCert, certPem: webCert.certPem + ca.chainPem },
    internalCert,
    store,
    totpKey: await loadSharedTotpKey(store),
  };
}
