/**
 * What every server part receives: configuration, database, PKI material, version and a logger. Built once
 * in main.ts (or by a test) and passed down; no module reaches for globals.
 */
import type { ServerConfig } from "./config/config.ts";
import type { Db } from "./db/db.ts";
import type { Ca } from "./pki/mod.ts";
import type { Logger } from "./core/log.ts";
import type { AuditRecorder } from "./audit/event.ts";
import type { ServerPki } from "./pki/server_pki.ts";
import { VERSION } from "../shared/version.ts";

/** Shared server state. */
export interface ServerContext {
  config: ServerConfig;
  db: Db;
  ca: Ca;
  /** Web-port certificate (operator files or generated). */
  webCert: { certPem: string; keyPem: string };
  /** Policy-port certificate: always signed by the internal CA. */
  internalCert: { certPem: string; keyPem: string };
  version: string;
  log: Logger;
  /** Audit recorder (database + optional syslog). */
  audit: AuditRecorder;
  /** Unique id of this server process (scale-out bookkeeping). */
  replicaId: string;
  /** Key sealing users' TOTP secrets at rest (`server_secrets` row `totp_key`, shared by every replica). */
  totpKey: Uint8Array<ArrayBuffer>;
}

/**
 * A context's parts from the PKI of a server process (`openServerPki`) and its own pieces; the caller adds
 * `audit` (which records through this very context).
 */
export function contextBase(
  pki: Pick<ServerPki, "ca" | "webCert" | "internalCert" | "totpKey">,
  parts: { config: ServerConfig; db: Db; log: Logger; replicaId: string },
): Omit<ServerContext, "audit"> {
  const { ca, webCert, internalCert, totpKey } = pki;
  return { ...parts, ca, webCert, internalCert, totpKey, version: VERSION };
}
