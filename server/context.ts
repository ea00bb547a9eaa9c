/**
 * What the services and transports of the server receive: configuration, database, PKI material, version, a
 * logger and the audit recorder. Built once per process in server.ts (or policy_worker.ts, or by a test) and
 * passed down. It stands above storage, PKI and audit (whose types it names) and below the services, so the
 * lower floors take the few parts they need as parameters instead (the audit recorder, for one).
 *
 * Not everything comes through here. What a process has exactly one of lives in module state: the off-loop
 * worker pool and its job table (core/offloop.ts), the metric counters and runtime sampler (metrics/), the
 * typed-content cache (hub/typed_content_cache.ts), the embedded migrations (db/migrate.ts), the Kerberos
 * library handle (grpc/kerberos_enroll.ts) and the dummy hash that makes a login for an unknown user take as
 * long as a real one (auth/password.ts). What belongs to one context but is made on first use hangs off it
 * in a WeakMap rather than in a member here: the live-event broker (events/broker.ts), the agent repository
 * (http/agent_repo.ts), the disk-encryption keyring (disk_encryption/kek.ts, keyed by its configuration) and
 * the CA's prepared certificate issuer (pki/sign_csr.ts, keyed by the CA).
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
