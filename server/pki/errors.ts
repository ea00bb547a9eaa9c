/**
 * The error type of the PKI module.
 *
 * @module
 */

/**
 * A request the CA refuses because of what the caller sent (a malformed or
 * weak certificate request, an invalid common name). The message is meant for
 * a person and names the fix, so the gRPC layer can return it as
 * `InvalidArgument`. Failures of the server itself (an unreadable CA key, a
 * full disk) are plain `Error`s and must not be reported as the caller's fault.
 */
export class PkiError extends Error {
  /** Creates the error with a message meant for the person who sent the request. */
  constructor(message: string) {
    super(message);
    this.name = "PkiError";
  }
}
