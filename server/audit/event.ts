/** The audit event every part of the server records through {@link AuditRecorder}. */

/** Outcome of an audited action. */
export type AuditOutcome = "success" | "failure" | "denied";

/** One audit event (stored in `audit_logs`, and sent to syslog when configured). */
export interface AuditEvent {
  /** `create`, `update`, `delete`, `policy.release`, `auth.login`, `access_denied`, `tamper_detected`, … */
  action: string;
  outcome: AuditOutcome;
  actor: { userId?: string; username?: string; nodeId?: string };
  resource: { type: string; id?: string; name?: string };
  sourceIp?: string;
  /** Free details; secrets are redacted by the recorder before storage. */
  details?: Record<string, unknown>;
}

/** Records audit events (database always, syslog when configured). */
export interface AuditRecorder {
  record(event: AuditEvent): Promise<void>;
}
