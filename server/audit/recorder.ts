/**
 * The one audit service: redacts an event, stores it in `audit_logs` and, when configured, forwards it to
 * syslog. Storing never throws at the caller: an audit write that fails is logged loudly instead of turning
 * an already-committed change into an error response.
 */
import type { ServerContext } from "../context.ts";
import type { AuditEvent, AuditRecorder } from "./event.ts";
import { insertAuditEvent, type StoredAuditEvent } from "./db_sink.ts";
import { redact } from "./redact.ts";
import { createSyslogSink, type SyslogSink } from "./syslog.ts";

/** The recorder plus shutdown (drains the syslog queue). */
export interface ClosableAuditRecorder extends AuditRecorder {
  close(): Promise<void>;
}

/** Creates the recorder for a server context (without `audit`, which this becomes). */
export function createAuditRecorder(ctx: Omit<ServerContext, "audit">): ClosableAuditRecorder {
  const syslog: SyslogSink | undefined = ctx.config.audit.syslog.enabled
    ? createSyslogSink({ config: ctx.config.audit.syslog, log: ctx.log, version: ctx.version })
    : undefined;
  return {
    async record(event: AuditEvent) {
      const clean: AuditEvent = { ...event, details: redact(event.details ?? {}) as Record<string, unknown> };
      let stored: StoredAuditEvent;
      try {
        stored = await insertAuditEvent(ctx.db, clean);
      } catch (err) {
        ctx.log.error("audit: could not store event", { action: event.action, error: String(err) });
        stored = { ...clean, id: 0, createdAt: new Date() };
      }
      syslog?.send(stored);
    },
    async close() {
      await syslog?.close();
    },
  };
}
