/**
 * The one audit service: redacts an event, stores it in `audit_logs` and, when configured, forwards it to
 * syslog. Called inside a unit of work (every audited REST mutation runs in one, see server/http/route.ts),
 * the row joins the change's transaction: a failed insert throws and takes the change down with it, and the
 * syslog copy leaves only after the commit, so a collector never hears of a change that did not happen.
 */
import type { ServerConfig } from "../config/config.ts";
import type { Logger } from "../core/log.ts";
import { afterCommit, type Db } from "../db/db.ts";
import type { AuditEvent, AuditRecorder } from "./event.ts";
import { insertAuditEvent, type StoredAuditEvent } from "./db_sink.ts";
import { redact } from "./redact.ts";
import { createSyslogSink, type SyslogSink } from "./syslog.ts";

/** The recorder plus shutdown (drains the syslog queue). */
export interface ClosableAuditRecorder extends AuditRecorder {
  close(): Promise<void>;
}

/**
 * Creates the recorder from the parts of a server context it needs (the context's `audit` is what this
 * becomes, so the context cannot be complete yet).
 */
export function createAuditRecorder(
  ctx: { config: ServerConfig; db: Db; log: Logger; version: string },
): ClosableAuditRecorder {
  const syslog: SyslogSink | undefined = ctx.config.audit.syslog.enabled
    ? createSyslogSink({ config: ctx.config.audit.syslog, log: ctx.log, version: ctx.version })
    : undefined;
  return {
    async record(event: AuditEvent) {
      const clean: AuditEvent = { ...event, details: redact(event.details ?? {}) as Record<string, unknown> };
      const stored: StoredAuditEvent = await insertAuditEvent(ctx.db, clean);
      if (syslog) afterCommit(() => syslog.send(stored));
    },
    async close() {
      await syslog?.close();
    },
  };
}
