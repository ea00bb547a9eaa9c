/**
 * Why an online node is Pending, as the server explains it (`pending_reasons`, server/domain/node_pending.ts):
 * one line for the node list's tooltip, and a list with the time each situation began for the node's page.
 */
import { html, nothing, type TemplateResult } from "lit";
import { relativeTime } from "./ui.ts";
import type { PendingReason } from "../api_types.ts";

/** The reasons in one line (the list's tooltip and the button's accessible name). */
export function pendingText(reasons: readonly PendingReason[]): string {
  return reasons.map((r) => r.message).join(" ");
}

/** The reasons as the node's page shows them; nothing when there is none. */
export function renderPendingReasons(
  reasons: readonly PendingReason[] | undefined,
): TemplateResult | typeof nothing {
  if (!reasons?.length) return nothing;
  return html`
    <sl-alert variant="warning" open class="pending-reasons">
      <sl-icon slot="icon" name="hourglass-split"></sl-icon>
      <strong>Why this node is pending</strong>
      <ul>
        ${reasons.map((r) =>
          html`<li data-code=${r.code}>${r.message}${
            r.since
              ? html`
                <span class="muted">(connected ${relativeTime(r.since)})</span>
              `
              : nothing
          }</li>`
        )}
      </ul>
    </sl-alert>
  `;
}
