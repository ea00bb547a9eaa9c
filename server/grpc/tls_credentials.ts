/**
 * TLS settings of the policy port. grpc-js's `ServerCredentials.createSsl` cannot set the TLS version or
 * ALPN, so this subclass hands the options to the HTTP/2 server grpc-js creates: client certificate required
 * and verified against the internal CA, TLS 1.3 only, ALPN `h2` only, and always the internal-CA-signed
 * server certificate (even when the web port uses an operator or ACME certificate).
 */
import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";

/** Certificates of the policy port. */
export interface PolicyPortTls {
  /** The internal CA (PEM): the only issuer accepted for client certificates. */
  caPem: string;
  /** Server certificate and key (PEM), signed by the internal CA. */
  certPem: string;
  keyPem: string;
}

/** grpc-js server credentials for the policy port. */
export class PolicyPortCredentials extends grpc.ServerCredentials {
  readonly #tls: PolicyPortTls;

  /** Builds the credentials from PEM material. */
  constructor(tls: PolicyPortTls) {
    super(
      {
        requestCert: true,
        rejectUnauthorized: true,
        minVersion: "TLSv1.3",
        ALPNProtocols: ["h2"],
        ecdhCurve: "X25519:P-256:P-384",
      },
      {
        // grpc-js and Node's TLS want Buffers, not Uint8Arrays or strings, here.
        ca: Buffer.from(tls.caPem),
        cert: Buffer.from(tls.certPem),
        key: Buffer.from(tls.keyPem),
      },
    );
    this.#tls = tls;
  }

  /** grpc-js compares credentials when the same port is bound twice. */
  override _equals(other: grpc.ServerCredentials): boolean {
    return other instanceof PolicyPortCredentials && other.#tls.caPem === this.#tls.caPem &&
      other.#tls.certPem === this.#tls.certPem && other.#tls.keyPem === this.#tls.keyPem;
  }
}
