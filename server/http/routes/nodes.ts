/**
 * REST routes for nodes: list, read, notes, revoke, re-enroll, delete, metadata request, and per-node
 * compliance.
 */
import type { ServerContext } from "../../context.ts";
import {
  COMPLIANCE_ROLLUPS,
  type ComplianceRollup,
  createReEnrollmentToken,
  deleteNode,
  EXPIRY_BUCKETS,
  type ExpiryBucket,
  getNode,
  listNodes,
  NODE_SORT_COLUMNS,
  NODE_STATUSES,
  type NodeFilter,
  nodeFilterOptions,
  type NodeStatus,
  requestNodeMetadata,
  revokeNode,
  updateNodeNotes,
} from "../../domain/nodes.ts";
import { closedObject, type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { listQuery, listRequest, pageSchema } from "../pagination.ts";
import { auditResource, body, caller, type RouteContext, type RouteSpec, uuidParam } from "../route.ts";
import { changeById, DATE_TIME, noContent, OPTIONAL_NAME_PATTERN, TEXT_PATTERN } from "./common.ts";
import { STATUS_COUNTS_SCHEMA } from "./compliance.ts";
import { pendingReasons } from "../../domain/node_pending.ts";
import { nodesRoute as route } from "./tags.ts";

const GROUP_REF: JsonSchema = objectSchema({ id: UUID_SCHEMA, name: { type: "string" } });
const NULLABLE_DATE: JsonSchema = { type: ["string", "null"], format: "date-time" };

/** Why an online node is Pending or receives no policy (server/domain/node_pending.ts). */
const PENDING_REASONS: JsonSchema = {
  type: "array",
  description:
    "Why this online node is Pending or receives no policy, each with the fix (empty when it is not, or is offline)",
  items: {
    type: "object",
    required: ["code", "message"],
    properties: {
      code: {
        type: "string",
        enum: [
          "no_group",
          "no_enabled_binding",
          "bound_policies_not_released",
          "joined_after_connect",
          "no_heartbeat",
          "agent_too_old",
          "type_unsupported",
          "not_reported_since_connect",
          "older_version_reported",
        ],
      },
      message: { type: "string" },
      policies: { type: "array", items: { type: "string" } },
      groups: { type: "array", items: { type: "string" } },
      since: DATE_TIME,
    },
  },
};

const NODE_SUMMARY_PROPERTIES: Record<string, JsonSchema> = {
  id: UUID_SCHEMA,
  name: { type: "string" },
  status: { type: "string", enum: NODE_STATUSES },
  status_reason: { type: "string" },
  fqdn: { type: "string" },
  ip_address: { type: "string" },
  os_name: { type: "string" },
  os_version: { type: "string" },
  desktop_environments: { type: "array", items: { type: "string" } },
  agent_version: { type: "string" },
  last_seen: NULLABLE_DATE,
  cert_not_after: NULLABLE_DATE,
  groups: { type: "array", items: GROUP_REF },
  created_at: DATE_TIME,
  connected_since: {
    ...NULLABLE_DATE,
    description:
      "When the oldest open policy stream was opened (null while offline); last_seen only moves with heartbeats",
  },
};

const NODE_SCHEMA: JsonSchema = objectSchema({
  ...NODE_SUMMARY_PROPERTIES,
  machine_id: { type: "string" },
  gnome_version: { type: "string" },
  agent_healthy: { type: "boolean" },
  agent_health_message: { type: "string" },
  cert_serial: { type: ["string", "null"] },
  cert_revoked: { type: "boolean" },
  notes: { type: "string" },
  updated_at: DATE_TIME,
  connected: { type: "boolean" },
  compliance: STATUS_COUNTS_SCHEMA,
});

/** The node as its own page reads it: with why it is Pending (an edit answers the node without them). */
const NODE_DETAIL_SCHEMA: JsonSchema = objectSchema({
  ...NODE_SCHEMA.properties,
  pending_reasons: PENDING_REASONS,
});

/** Query parameters of the node list's filters (the list, and "select all matching" of bulk actions). */
export const NODE_FILTER_QUERY: Record<string, JsonSchema> = {
  status: { type: "string", enum: NODE_STATUSES },
  group: {
    type: "string",
    pattern: "^(none|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$",
    description: "Node group id, or `none` for nodes in no group",
  },
  os: { type: "string", maxLength: 200 },
  compliance: {
    type: "string",
    enum: COMPLIANCE_ROLLUPS,
    description: "Worst compliance status over the policies that reach the node (none: no policy)",
  },
  agent_version: { type: "string", maxLength: 100 },
  desktop: { type: "string", maxLength: 100 },
  cert_expiry: {
    type: "string",
    enum: EXPIRY_BUCKETS,
    description: "Certificate expiry bucket, as the dashboard counts them",
  },
  search: {
    type: "string",
    maxLength: 200,
    // What is searched is single-line text; control characters could only make odd matches.
    pattern: OPTIONAL_NAME_PATTERN,
    description: "Substring of name, FQDN, IP address or machine id",
  },
};

/** The node list filter a request's query names (after validation against {@link NODE_FILTER_QUERY}). */
export function nodeFilterFrom(c: RouteContext): NodeFilter {
  return {
    status: c.req.query("status") as NodeStatus | undefined,
    group: c.req.query("group")?.toLowerCase(),
    os: c.req.query("os"),
    agentVersion: c.req.query("agent_version"),
    desktop: c.req.query("desktop"),
    search: c.req.query("search"),
    compliance: c.req.query("compliance") as ComplianceRollup | undefined,
    certExpiry: c.req.query("cert_expiry") as ExpiryBucket | undefined,
  };
}

/** Routes of the node area. */
export function nodeRoutes(ctx: ServerContext): RouteSpec[] {
  const { db } = ctx;
  return [
    route("GET /api/v1/nodes", "node:view", {
      summary:
        "List nodes, filtered (status, group id or `none`, OS, agent version, desktop, compliance, certificate expiry, search), sorted, paginated",
      query: { ...listQuery(NODE_SORT_COLUMNS), ...NODE_FILTER_QUERY },
      responses: {
        "200": {
          description: "A page of nodes",
          schema: pageSchema(objectSchema({
            ...NODE_SUMMARY_PROPERTIES,
            compliance_rollup: objectSchema({
              worst: { type: "string", enum: COMPLIANCE_ROLLUPS },
              total: { type: "integer" },
              problems: { type: "integer" },
              unknown: { type: "integer" },
            }, { description: "Worst compliance status over the policies that reach the node, with counts" }),
            pending_reasons: PENDING_REASONS,
          })),
        },
      },
      handler: async (c) => {
        const page = await listNodes(db, nodeFilterFrom(c), listRequest(c));
        const stuck = page.items.filter((n) => ["unknown", "none"].includes(n.compliance_rollup?.worst));
        const reasons = await pendingReasons(db, stuck.map((n) => n.id));
        return c.json({
          ...page,
          items: page.items.map((n) => ({ ...n, pending_reasons: reasons.get(n.id) ?? [] })),
        });
      },
    }),
    route("GET /api/v1/nodes/filter-options", "node:view", {
      summary: "Distinct operating systems, agent versions and desktops, for the node list's filters",
      responses: {
        "200": {
          description: "Filter values",
          schema: objectSchema({
            os: { type: "array", items: { type: "string" } },
            agent_versions: { type: "array", items: { type: "string" } },
            desktops: { type: "array", items: { type: "string" } },
          }),
        },
      },
      handler: async (c) => c.json(await nodeFilterOptions(db)),
    }),
    route("GET /api/v1/nodes/:id", "node:view", {
      summary: "Read a node: groups, certificate, last heartbeat facts, connection and compliance summary",
      responses: { "200": { description: "The node", schema: NODE_DETAIL_SCHEMA } },
      handler: async (c) => {
        const node = await getNode(db, uuidParam(c, "id"));
        const reasons = await pendingReasons(db, [node.id]);
        return c.json({ ...node, pending_reasons: reasons.get(node.id) ?? [] });
      },
    }),
    route("PUT /api/v1/nodes/:id", "node:edit", {
      summary: "Edit a node's notes (its name is its certificate identity and cannot change)",
      audit: { resourceType: "node" },
      body: closedObject({ notes: { type: "string", maxLength: 4000, pattern: TEXT_PATTERN } }, ["notes"]),
      responses: { "200": { description: "The node", schema: NODE_SCHEMA } },
      handler: changeById(db, (tx, id, c) => updateNodeNotes(tx, id, body<{ notes: string }>(c).notes), {
        track: { read: getNode, fields: ["notes"] },
      }),
    }),
    route("DELETE /api/v1/nodes/:id", "node:delete", {
      summary: "Delete a node: every certificate serial it had is revoked first and its stream is closed",
      audit: { resourceType: "node" },
      responses: { "204": { description: "Deleted" } },
      handler: changeById(db, async (tx, id, c) => {
        const node = await deleteNode(tx, id);
        ctx.log.info("node deleted; its certificates are revoked", {
          node: node.name,
          by: caller(c).username,
        });
        return node;
      }, { respond: noContent }),
    }),
    route("POST /api/v1/nodes/:id/revoke", "node:revoke", {
      summary:
        "Revoke every certificate of the node (refused on both ports from now on) and close its stream",
      audit: { resourceType: "node", action: "node.revoke" },
      body: closedObject({ reason: { type: "string", maxLength: 500, pattern: TEXT_PATTERN } }),
      responses: {
        "200": {
          description: "Serials revoked by this call",
          schema: objectSchema({ revoked_serials: { type: "array", items: { type: "string" } } }),
        },
      },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const { reason } = body<{ reason?: string }>(c) ?? {};
        let name = "";
        const serials = await db.transaction(async (tx) => {
          const node = await getNode(tx, id);
          name = node.name;
          auditResource(c, { id, name: node.name });
          return await revokeNode(tx, id, { reason });
        });
        c.set("auditDetails", { revoked_serials: serials });
        ctx.log.info("node revoked", {
          node: name,
          serials: serials.join(","),
          by: caller(c).username,
          reason,
        });
        return c.json({ revoked_serials: serials });
      },
    }),
    // Whoever may create enrollment tokens may create this one.
    route("POST /api/v1/nodes/:id/re-enroll", "node_group:create", {
      summary:
        "Create a one-time token that re-enrolls this revoked node under its name (valid 5 minutes); " +
        "the node keeps its record, groups and history and gets a new certificate",
      audit: { resourceType: "node", action: "enrollment_token.create" },
      responses: {
        "201": {
          description: "The token (shown once) and the command to run on the node",
          schema: {
            type: "object",
            required: ["token", "node_id", "node_name", "expires_at", "command"],
            properties: {
              token: { type: "string" },
              node_id: UUID_SCHEMA,
              node_name: { type: "string" },
              expires_at: DATE_TIME,
              command: { type: "string" },
            },
          },
        },
      },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const created = await db.transaction(async (tx) => {
          const node = await getNode(tx, id);
          auditResource(c, { id, name: node.name });
          return await createReEnrollmentToken(tx, id, { createdBy: caller(c).username });
        });
        c.set("auditDetails", { re_enroll: true, expires_at: created.expires_at.toISOString() });
        c.header("Cache-Control", "no-store");
        // The environment variable keeps the token out of the process list.
        const command = `SVC_ENROLLMENT_TOKEN='${created.token}' svc-agent`;
        return c.json({ ...created, command }, 201);
      },
    }),
    route("POST /api/v1/nodes/:id/metadata-request", "node:edit", {
      summary: "Ask the connected agent for a fresh heartbeat (409 when the agent is not connected)",
      audit: { resourceType: "node", action: "node.metadata_request" },
      responses: {
        "202": {
          description: "Request sent to the agent's stream",
          schema: objectSchema({ requested: { type: "boolean", enum: [true] } }),
        },
      },
      handler: changeById(db, requestNodeMetadata, { respond: (c) => c.json({ requested: true }, 202) }),
    }),
  ];
}
