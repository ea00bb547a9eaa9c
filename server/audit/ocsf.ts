/**
 * OCSF 1.3 JSON rendering of an audit event. Logins and logouts are Authentication (3002), changes to users
 * Account Change (3001), tamper reports File System Activity (1001), everything else API Activity (6003).
 * `type_uid` is `class_uid * 100 + activity_id` as the schema defines; the outcome is `status_id`.
 */
import type { StoredAuditEvent } from "./db_sink.ts";
import { OCSF_SEVERITY, severityOf } from "./severity.ts";
import { parseIp } from "../core/client_ip.ts";

/** OCSF schema version the events follow. */
export const OCSF_VERSION = "1.3.0";

interface Classified {
  categoryUid: number;
  categoryName: string;
  classUid: number;
  className: string;
  activityId: number;
  activityName: string;
}

const ACCOUNT_ACTIVITIES: Record<string, [number, string]> = {
  create: [1, "Create"],
  delete: [6, "Delete"],
  "user.password_change": [3, "Password Change"],
  "user.password_reset": [4, "Password Reset"],
};
const API_ACTIVITIES: Record<string, [number, string]> = {
  create: [1, "Create"],
  read: [2, "Read"],
  update: [3, "Update"],
  delete: [4, "Delete"],
};

function classify(event: StoredAuditEvent): Classified {
  const iam = { categoryUid: 3, categoryName: "Identity & Access Management" };
  if (event.action === "auth.login" || event.action === "auth.logout") {
    const logon = event.action === "auth.login";
    return {
      ...iam,
      classUid: 3002,
      className: "Authentication",
      activityId: logon ? 1 : 2,
      activityName: logon ? "Logon" : "Logoff",
    };
  }
  if (event.resource.type === "user" && event.action in ACCOUNT_ACTIVITIES) {
    const [activityId, activityName] = ACCOUNT_ACTIVITIES[event.action];
    return { ...iam, classUid: 3001, className: "Account Change", activityId, activityName };
  }
  if (event.action === "tamper_detected") {
    return {
      categoryUid: 1,
      categoryName: "System Activity",
      classUid: 1001,
      className: "File System Activity",
      activityId: 3,
      activityName: "Update",
    };
  }
  const [activityId, activityName] = API_ACTIVITIES[event.action] ?? [99, "Other"];
  return {
    categoryUid: 6,
    categoryName: "Application Activity",
    classUid: 6003,
    className: "API Activity",
    activityId,
    activityName,
  };
}

/** Renders one event as a compact OCSF JSON object (one line). */
export function formatOcsf(event: StoredAuditEvent, version: string): string {
  const c = classify(event);
  const severity = OCSF_SEVERITY[severityOf(event)];
  const success = event.outcome === "success";
  const actorUser = event.actor.username || event.actor.userId
    ? { name: event.actor.username || undefined, uid: event.actor.userId }
    : undefined;
  const resource = {
    type: event.resource.type,
    uid: event.resource.id || undefined,
    name: event.resource.name || undefined,
  };
  const out: Record<string, unknown> = {
    category_uid: c.categoryUid,
    category_name: c.categoryName,
    class_uid: c.classUid,
    class_name: c.className,
    activity_id: c.activityId,
    activity_name: c.activityName,
    type_uid: c.classUid * 100 + c.activityId,
    type_name: `${c.className}: ${c.activityName}`,
    time: event.createdAt.getTime(),
    severity_id: severity.id,
    severity: severity.name,
    status_id: success ? 1 : 2,
    status: success ? "Success" : "Failure",
    status_detail: event.outcome,
    message: `${event.action} ${event.resource.type}${
      event.resource.id ? ` ${event.resource.id}` : ""
    }: ${event.outcome}`,
    metadata: {
      version: OCSF_VERSION,
      uid: event.id ? String(event.id) : undefined,
      event_code: event.action,
      log_name: "audit",
      product: { name: "svc-server", vendor_name: "svc", version },
    },
    actor: actorUser ? { user: actorUser } : undefined,
    src_endpoint: event.sourceIp && parseIp(event.sourceIp) ? { ip: event.sourceIp } : undefined,
    unmapped: { outcome: event.outcome, node_id: event.actor.nodeId, details: event.details },
  };
  if (c.classUid === 3002) {
    out.user = {
      name: event.resource.name || event.actor.username || undefined,
      uid: event.resource.id || undefined,
    };
  } else if (c.classUid === 3001) {
    out.user = { name: event.resource.name || undefined, uid: event.resource.id || undefined };
  } else if (c.classUid === 1001) {
    const file = event.details?.file;
    out.file = {
      path: typeof file === "string" ? file : undefined,
      name: typeof file === "string" ? file.split("/").pop() : undefined,
      type_id: 1,
    };
    out.device = event.actor.nodeId
      ? { uid: event.actor.nodeId, name: event.resource.name || undefined }
      : undefined;
  } else {
    out.api = { operation: event.action, request: { uid: event.id ? String(event.id) : undefined } };
    out.resources = [resource];
    if (typeof event.details?.method === "string" || typeof event.details?.path === "string") {
      out.http_request = { http_method: event.details?.method, url: { path: event.details?.path } };
    }
  }
  return JSON.stringify(out);
}
