/**
 * ArcSight Common Event Format (CEF:0) rendering of an audit event. Header fields escape `\` and `|`;
 * extension values escape `\`, `=` and line breaks, so a hostile resource name cannot inject fields.
 */
import type { StoredAuditEvent } from "./db_sink.ts";
import { CEF_SEVERITY, severityOf } from "./severity.ts";
import { parseIp } from "../core/client_ip.ts";

/** Vendor and product in the CEF header. */
export const CEF_VENDOR = "svc";
/** Product in the CEF header. */
export const CEF_PRODUCT = "svc-server";

/** Renders one event as a CEF line (no trailing newline). */
export function formatCef(event: StoredAuditEvent, version: string): string {
  const name = `${event.resource.type || "server"} ${event.action} ${event.outcome}`;
  const header = [
    "CEF:0",
    CEF_VENDOR,
    CEF_PRODUCT,
    version,
    event.action,
    name,
    String(CEF_SEVERITY[severityOf(event)]),
  ].map((v, i) => (i === 0 ? v : escapeHeader(v)));
  const ext: [string, string | number | undefined][] = [
    ["rt", event.createdAt.getTime()],
    ["externalId", event.id || undefined],
    ["act", event.action],
    ["outcome", event.outcome],
    ["src", event.sourceIp && parseIp(event.sourceIp) ? event.sourceIp : undefined],
    ["suser", event.actor.username || undefined],
    ["suid", event.actor.userId],
    ["cs1Label", "resourceType"],
    ["cs1", event.resource.type],
    ["cs2Label", "resourceId"],
    ["cs2", event.resource.id],
    ["cs3Label", "resourceName"],
    ["cs3", event.resource.name],
    ["cs4Label", "nodeId"],
    ["cs4", event.actor.nodeId],
    ["requestMethod", typeof event.details?.method === "string" ? event.details.method : undefined],
    ["request", typeof event.details?.path === "string" ? event.details.path : undefined],
    [
      "msg",
      event.details && Object.keys(event.details).length > 0 ? JSON.stringify(event.details) : undefined,
    ],
  ];
  const extension = ext
    .filter((pair, i, all) => pair[1] !== undefined && pair[1] !== "" && !isOrphanLabel(pair, all[i + 1]))
    .map(([k, v]) => `${k}=${escapeExtension(String(v))}`)
    .join(" ");
  return `${header.join("|")}|${extension}`;
}

/** A `csNLabel` whose value is absent is dropped with it. */
function isOrphanLabel(pair: [string, unknown], next: [string, unknown] | undefined): boolean {
  return pair[0].endsWith("Label") && (next?.[1] === undefined || next?.[1] === "");
}

function escapeHeader(v: string): string {
  return v.replace(/[\\|]/g, (ch) => `\\${ch}`).replace(/[\r\n]+/g, " ");
}

function escapeExtension(v: string): string {
  return v.replace(/[\\=]/g, (ch) => `\\${ch}`).replace(/\r\n|\n/g, "\\n").replace(/\r/g, "\\r");
}
