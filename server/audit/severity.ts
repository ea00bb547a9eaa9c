/** How serious an audit event is, mapped once and rendered per format (syslog, CEF, OCSF). */
import type { AuditEvent } from "./event.ts";

/** Severity levels, lowest first. */
export type AuditSeverity = "low" | "medium" | "high";

/**
 * Tampering, replayed refresh tokens, secret reveals and every refused attempt on a disk recovery key are high;
 * other denials, failures and deletions medium.
 */
export function severityOf(
  event: Pick<AuditEvent, "action" | "outcome"> & { resource?: Pick<AuditEvent["resource"], "type"> },
): AuditSeverity {
  if (
    event.action === "tamper_detected" || event.action === "auth.refresh_reuse" ||
    event.action.includes("reveal") ||
    (event.resource?.type === "luks_volume" && event.outcome !== "success")
  ) {
    return "high";
  }
  if (event.outcome !== "success" || event.action === "delete" || event.action.endsWith(".delete")) {
    return "medium";
  }
  return "low";
}

/** RFC 5424 severity: warning, notice, informational. */
export const SYSLOG_SEVERITY: Record<AuditSeverity, number> = { high: 4, medium: 5, low: 6 };
/** CEF severity (0-10). */
export const CEF_SEVERITY: Record<AuditSeverity, number> = { high: 8, medium: 5, low: 3 };
/** OCSF severity_id: High, Medium, Low. */
export const OCSF_SEVERITY: Record<AuditSeverity, { id: number; name: string }> = {
  high: { id: 4, name: "High" },
  medium: { id: 3, name: "Medium" },
  low: { id: 2, name: "Low" },
};
