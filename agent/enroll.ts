/**
 * Enrollment: a new ECDSA P-256 key and CSR, `Enroll` (or `KerberosEnroll` first when Kerberos
 * is configured, a keytab exists and this build can produce a SPNEGO token) on the web port,
 * checks on what came back, and the key, certificate and CA certificate written atomically.
 * Errors say what went wrong and what to do.
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";
import { GrpcError } from "../shared/grpc/adapter.ts";
import { generateKeyAndCsr } from "../shared/pki/csr.ts";
import type { EnrollResponse } from "../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import type { AgentConfig } from "./config.ts";
import { createEnrollmentClient, diagnoseTls, type EnrollmentClient, systemTrustStore } from "./client.ts";
import { checkIssuedCertificate, writeEnrollment } from "./identity.ts";
import type { Logger } from "./log.ts";

/** An enrollment that failed, with a message meant for the person running the command. */
export class EnrollmentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EnrollmentError";
  }
}

/**
 * Produces the DER SPNEGO token for the server's service principal from the machine keytab.
 * Supplied by the Kerberos integration; without it Kerberos enrollment is skipped.
 */
export type SpnegoProvider = (
  params: { keytabFile: string; servicePrincipal: string },
) => Promise<Uint8Array>;

/**
 * The default {@linkcode SpnegoProvider}: the system GSSAPI (MIT krb5's libgssapi_krb5) through FFI, loaded
 * only when Kerberos enrollment is tried. `HTTP/host[@REALM]` becomes the host-based name `HTTP@host`.
 */
export const systemSpnego: SpnegoProvider = async ({ keytabFile, servicePrincipal }) => {
  const { openGssapi } = await import("../shared/pki/gssapi.ts");
  const m = /^([^/@]+)\/([^@]+)(@.*)?$/.exec(servicePrincipal);
  const target = m ? `${m[1]}@${m[2]}` : servicePrincipal;
  const gss = openGssapi({ clientKeytab: keytabFile });
  try {
    return gss.initToken(target);
  } finally {
    gss.close();
  }
};

/** Options of {@linkcode enroll}. */
export interface EnrollOptions {
  config: AgentConfig;
  /** Path of the configuration file, named in hints. */
  configPath: string;
  token?: string;
  logger: Logger;
  spnego?: SpnegoProvider;
  /** Trusted roots for the enrollment connection; default the system trust store. */
  trustStore?: string;
}

/** What a successful enrollment produced. */
export interface EnrollResult {
  nodeId: string;
  nodeName: string;
  nodeGroup: string;
  method: "token" | "kerberos";
}

const TIMEOUT_MS = 30_000;

async function keytabExists(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

async function explain(err: unknown, options: EnrollOptions, trustStore: string): Promise<EnrollmentError> {
  const { server } = options.config;
  const where = `${server.address}:${server.enrollmentPort}`;
  if (!(err instanceof GrpcError)) return new EnrollmentError(`enrollment failed: ${(err as Error).message}`);
  switch (err.code) {
    case grpc.status.UNAUTHENTICATED:
      return new EnrollmentError(
        `the server refused the enrollment token: ${err.message} (tokens are single use and valid 5 minutes)`,
      );
    case grpc.status.ALREADY_EXISTS:
      return new EnrollmentError(`enrollment refused: ${err.message}`);
    case grpc.status.UNAVAILABLE:
    case grpc.status.DEADLINE_EXCEEDED: {
      if (!server.insecureSkipVerify) {
        const diagnosis = await diagnoseTls({
          address: server.address,
          port: server.enrollmentPort,
          trustStore,
        });
        if (diagnosis?.cause === "unknown authority") {
          return new EnrollmentError(
            `cannot verify the server certificate of ${where}: certificate signed by unknown authority ` +
              `(${diagnosis.detail}). Add the server's CA (https://${where}/agent/ca.crt) to the system trust ` +
              `store, or set server.insecure_skip_verify: true in ${options.configPath} for enrollment only`,
          );
        }
        if (diagnosis?.cause === "name mismatch") {
          return new EnrollmentError(
            `cannot verify the server certificate of ${where}: certificate name mismatch, it is not valid for ` +
              `"${server.address}" (${diagnosis.detail}). Set server.address in ${options.configPath} to a name ` +
              "the certificate carries (server.hostnames on the server)",
          );
        }
        if (diagnosis?.cause === "expired") {
          return new EnrollmentError(
            `the server certificate of ${where} is expired or not yet valid (${diagnosis.detail})`,
          );
        }
        if (diagnosis) return new EnrollmentError(`cannot connect to ${where}: ${diagnosis.detail}`);
      }
      return new EnrollmentError(`cannot reach the enrollment service at ${where}: ${err.message}`);
    }
    default:
      return new EnrollmentError(`enrollment failed: ${err.message}`);
  }
}

async function finish(
  response: EnrollResponse,
  keyPem: string,
  options: EnrollOptions,
  method: EnrollResult["method"],
): Promise<EnrollResult> {
  const { config } = options;
  try {
    await checkIssuedCertificate({
      certPem: response.signedCertPem,
      caPem: response.caCertPem,
      keyPem,
      commonName: config.agent.clientId,
    });
  } catch (err) {
    throw new EnrollmentError(`enrollment answer rejected: ${(err as Error).message}`);
  }
  await writeEnrollment(config.enrollment.dataDir, {
    keyPem,
    certPem: response.signedCertPem,
    caPem: response.caCertPem,
  });
  return {
    nodeId: response.nodeId,
    nodeName: config.agent.clientId,
    nodeGroup: response.assignedNodeGroup,
    method,
  };
}

/**
 * Enrolls this node and writes `agent.key`, `agent.crt` and `ca.crt`.
 *
 * @throws {EnrollmentError} with a message naming the cause and the fix.
 */
export async function enroll(options: EnrollOptions): Promise<EnrollResult> {
  const { config, logger } = options;
  const { server, kerberos } = config;
  if (server.insecureSkipVerify) {
    logger.warn(
      "server.insecure_skip_verify is true: the enrollment connection does not verify the server certificate; " +
        "the CA received now is pinned for every later connection",
    );
  }
  const trustStore = options.trustStore ?? await systemTrustStore();
  const client: EnrollmentClient = await createEnrollmentClient({
    address: server.address,
    port: server.enrollmentPort,
    insecureSkipVerify: server.insecureSkipVerify,
    trustStore,
  });
  try {
    if (kerberos.enabled && kerberos.servicePrincipal && await keytabExists(kerberos.keytabFile)) {
      const spnego = options.spnego ?? systemSpnego;
      try {
        const keys = await generateKeyAndCsr(config.agent.clientId);
        const spnegoToken = await spnego({
          keytabFile: kerberos.keytabFile,
          servicePrincipal: kerberos.servicePrincipal,
        });
        const response = await client.kerberosEnroll(
          { spnegoToken, csrPem: keys.csrPem, nodeName: config.agent.clientId },
          { deadline: Date.now() + TIMEOUT_MS },
        );
        return await finish(response, keys.keyPem, options, "kerberos");
      } catch (err) {
        logger.warn("Kerberos enrollment failed; falling back to the enrollment token", {
          error: err instanceof Error ? err.message : String(err),
        });
      }
    }
    if (!options.token) {
      throw new EnrollmentError(
        "svc-agent is not enrolled and no enrollment token was provided; pass --token-file FILE or set " +
          "SVC_ENROLLMENT_TOKEN",
      );
    }
    const keys = await generateKeyAndCsr(config.agent.clientId);
    let response: EnrollResponse;
    try {
      response = await client.enroll(
        { enrollmentToken: options.token, csrPem: keys.csrPem, nodeName: config.agent.clientId },
        { deadline: Date.now() + TIMEOUT_MS },
      );
    } catch (err) {
      throw await explain(err, options, trustStore);
    }
    return await finish(response, keys.keyPem, options, "token");
  } finally {
    client.close();
  }
}
