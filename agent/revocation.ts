/**
 * What a refused agent says. When the policy port refuses the node's certificate (revoked, or the
 * node deleted), the agent keeps its key, keeps enforcing the policies it last received and keeps
 * retrying; it tells the operator once, then hourly, exactly what the administrator must do, instead
 * of one error per retry.
 *
 * @module
 */

import type { Logger } from "./log.ts";

/** Options of {@linkcode RevocationNotice}. */
export interface RevocationNoticeOptions {
  logger: Logger;
  /** The node name (certificate Common Name). */
  nodeName: string;
  /** Interval of the reminder; default one hour. */
  everyMs?: number;
}

/** The instruction for a refused node, as logged. */
export function revocationInstruction(nodeName: string): string {
  return `an administrator must re-enroll node "${nodeName}": in the svc web UI open Nodes → ${nodeName} → ` +
    `Re-enroll (REST: POST /api/v1/nodes/{id}/re-enroll), or, if the node was deleted, create an enrollment ` +
    `token for its node group; then run on this node: svc-agent --token-file FILE. The current key and ` +
    `certificate stay in place until the new enrollment succeeds, and the running agent picks the new ` +
    `certificate up at its next retry. Until then it keeps enforcing the policies it last received`;
}

/** See the module documentation. */
export class RevocationNotice {
  readonly #options: RevocationNoticeOptions;
  #since: number | undefined;
  #lastLogged = 0;

  constructor(options: RevocationNoticeOptions) {
    this.#options = options;
  }

  /** Whether the server currently refuses the node. */
  get active(): boolean {
    return this.#since !== undefined;
  }

  /** The server refused the node's certificate with `reason`; the next try is in `retryInMs`. */
  refused(reason: string, retryInMs: number): void {
    const now = Date.now();
    const { logger, nodeName } = this.#options;
    if (this.#since === undefined || now - this.#lastLogged >= (this.#options.everyMs ?? 3_600_000)) {
      this.#since ??= now;
      this.#lastLogged = now;
      logger.error(`the server refuses this node's certificate: ${revocationInstruction(nodeName)}`, {
        reason,
        refused_since: new Date(this.#since).toISOString(),
      });
      return;
    }
    logger.debug("the server still refuses this node's certificate", { reason, retry_in_ms: retryInMs });
  }

  /** The server accepted the node again. */
  clear(): void {
    if (this.#since === undefined) return;
    this.#since = undefined;
    this.#lastLogged = 0;
    this.#options.logger.info("the server accepts this node's certificate again");
  }
}
