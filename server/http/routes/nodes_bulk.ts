/**
 * REST routes of the node list's bulk actions: which nodes a filter matches ("select all matching"), and
 * move to a group, re-enroll and delete for up to {@link MAX_BULK_NODES} nodes. Each node is changed in a
 * savepoint of its own, so one node's refusal (deleted meanwhile, a permission it needs) is reported for that
 * node while the others are done; each node gets its own audit row naming it and what changed, and the
 * request its row with the counts.
 */
import type { ServerContext } from "../../context.ts";
import type { Queryable } from "../../db/db.ts";
import { deleteNode } from "../../domain/nodes.ts";
import {
  matchingNodes,
  MAX_BULK_NODES,
  moveNodeToGroup,
  nodeName,
  prepareReEnrollment,
} from "../../domain/nodes_bulk.ts";
import { getNodeGroup } from "../../domain/node_groups.ts";
import { toHttpError } from "../errors.ts";
import { closedObject, type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { auditResource, body, caller, type RouteContext, type RouteSpec } from "../route.ts";
import { DATE_TIME } from "./common.ts";
import { NODE_FILTER_QUERY, nodeFilterFrom } from "./nodes.ts";
import { nodesRoute as route } from "./tags.ts";

const NODE_IDS: JsonSchema = {
  type: "array",
  minItems: 1,
  maxItems: MAX_BULK_NODES,
  uniqueItems: true,
  items: UUID_SCHEMA,
  description: `The nodes (at most ${MAX_BULK_NODES})`,
};

/** One node's outcome. */
interface NodeResult {
  node_id: string;
  node_name: string;
  ok: boolean;
  /** Why it failed (ok false), as the single-node route would have said. */
  error?: { code: string; message: string };
  [extra: string]: unknown;
}

function resultsSchema(extra: Record<string, JsonSchema> = {}): JsonSchema {
  return {
    type: "object",
    required: ["results", "succeeded", "failed"],
    properties: {
      succeeded: { type: "integer" },
      failed: { type: "integer" },
      results: {
        type: "array",
        items: {
          type: "object",
          required: ["node_id", "node_name", "ok"],
          properties: {
            node_id: UUID_SCHEMA,
            node_name: { type: "string", description: "The node's name (its id when it no longer exists)" },
            ok: { type: "boolean" },
            error: objectSchema({ code: { type: "string" }, message: { type: "string" } }),
            ...extra,
          },
        },
      },
    },
  };
}

/**
 * Runs `change` for every node in a savepoint of its own and records one audit row per node (`action`,
 * resource the node, details from the change). Refusals a single-node route would answer (4xx) become that
 * node's failure; anything else fails the request.
 */
async function eachNode(
  ctx: ServerContext,
  c: RouteContext,
  input: { nodeIds: string[]; action: string },
  change: (
    tx: Queryable,
    nodeId: string,
  ) => Promise<{ name: string; details: Record<string, unknown>; answer?: object }>,
): Promise<Response> {
  const me = caller(c);
  const results: NodeResult[] = [];
  for (const raw of input.nodeIds) {
    const nodeId = raw.toLowerCase();
    let result: NodeResult;
    let details: Record<string, unknown>;
    try {
      const done = await ctx.db.transaction((tx) => change(tx, nodeId));
      result = { node_id: nodeId, node_name: done.name, ok: true, ...done.answer };
      details = { bulk: true, ...done.details };
    } catch (err) {
      const refusal = toHttpError(err);
      if (!refusal || refusal.status >= 500) throw err;
      const name = await nodeName(ctx.db, nodeId).catch(() => nodeId);
      result = {
        node_id: nodeId,
        node_name: name,
        ok: false,
        error: { code: refusal.code, message: refusal.message },
      };
      details = { bulk: true, error: refusal.code, message: refusal.message };
    }
    results.push(result);
    await ctx.audit.record({
      action: input.action,
      outcome: result.ok ? "success" : "failure",
      actor: { userId: me.id, username: me.username },
      resource: { type: "node", id: nodeId, name: result.node_name },
      sourceIp: c.get("clientIp"),
      details,
    });
  }
  const succeeded = results.filter((r) => r.ok).length;
  auditResource(c, { name: `${input.nodeIds.length} node${input.nodeIds.length === 1 ? "" : "s"}` });
  c.set("auditDetails", { requested: input.nodeIds.length, succeeded, failed: results.length - succeeded });
  return c.json({ results, succeeded, failed: results.length - succeeded });
}

/** The bulk routes of the node list. */
export function nodeBulkRoutes(ctx: ServerContext): RouteSpec[] {
  const { db } = ctx;
  return [
    route("GET /api/v1/nodes/matching", "node:view", {
      summary:
        `The nodes a node-list filter matches (ids and names, at most ${MAX_BULK_NODES}) and how many match: "select all matching" of the bulk actions`,
      query: NODE_FILTER_QUERY,
      responses: {
        "200": {
          description: "The matching nodes by name, and the full count",
          schema: objectSchema({
            total: { type: "integer" },
            items: {
              type: "array",
              items: objectSchema({ id: UUID_SCHEMA, name: { type: "string" } }),
            },
          }),
        },
      },
      handler: async (c) => c.json(await matchingNodes(db, nodeFilterFrom(c))),
    }),
    route("POST /api/v1/nodes/bulk/move", "node_group:edit", {
      summary:
        "Move nodes into a node group: each joins it and leaves its other groups (keep_other_groups keeps them). No resync: agents read their groups when their stream next opens",
      audit: { resourceType: "node", action: "node.bulk_move" },
      body: closedObject({
        node_ids: NODE_IDS,
        node_group_id: UUID_SCHEMA,
        keep_other_groups: { type: "boolean", default: false },
      }, ["node_ids", "node_group_id"]),
      responses: {
        "200": {
          description: "Per-node outcome",
          schema: resultsSchema({
            joined: { type: "string" },
            left: { type: "array", items: { type: "string" } },
          }),
        },
      },
      handler: async (c) => {
        const input = body<{ node_ids: string[]; node_group_id: string; keep_other_groups?: boolean }>(c);
        const groupId = input.node_group_id.toLowerCase();
        // An unknown group refuses the whole request (404 naming it) rather than every node one by one.
        await getNodeGroup(db, groupId);
        return await eachNode(
          ctx,
          c,
          { nodeIds: input.node_ids, action: "node.move_to_group" },
          async (tx, id) => {
            const move = await moveNodeToGroup(tx, id, groupId, { keepOtherGroups: input.keep_other_groups });
            return {
              name: move.name,
              details: { group: move.joined, left_groups: move.left, already_member: move.alreadyMember },
              answer: { joined: move.joined, left: move.left },
            };
          },
        );
      },
    }),
    route("POST /api/v1/nodes/bulk/re-enroll", "node_group:create", {
      summary:
        "Re-enroll nodes: a still-valid certificate is revoked first (needs node:revoke; its stream closes), then each node gets a single-use re-enrollment token (valid 5 minutes) and the command to run on it",
      audit: { resourceType: "node", action: "node.bulk_re_enroll" },
      body: closedObject({ node_ids: NODE_IDS }, ["node_ids"]),
      responses: {
        "200": {
          description: "Per-node outcome; tokens are shown only in this answer",
          schema: resultsSchema({
            token: { type: "string" },
            command: { type: "string" },
            expires_at: DATE_TIME,
            revoked_serials: { type: "array", items: { type: "string" } },
          }),
        },
      },
      handler: async (c) => {
        const me = caller(c);
        const mayRevoke = me.permissions.has("node:revoke");
        c.header("Cache-Control", "no-store");
        return await eachNode(
          ctx,
          c,
          { nodeIds: body<{ node_ids: string[] }>(c).node_ids, action: "enrollment_token.create" },
          async (tx, id) => {
            const done = await prepareReEnrollment(tx, id, { createdBy: me.username, mayRevoke });
            return {
              name: done.node_name,
              details: {
                re_enroll: true,
                revoked_serials: done.revoked_serials,
                expires_at: done.expires_at.toISOString(),
              },
              answer: {
                token: done.token,
                command: `SVC_ENROLLMENT_TOKEN='${done.token}' svc-agent`,
                expires_at: done.expires_at,
                revoked_serials: done.revoked_serials,
              },
            };
          },
        );
      },
    }),
    route("POST /api/v1/nodes/bulk/delete", "node:delete", {
      summary: "Delete nodes: every certificate of each is revoked first and its stream is closed",
      audit: { resourceType: "node", action: "node.bulk_delete" },
      body: closedObject({ node_ids: NODE_IDS }, ["node_ids"]),
      responses: { "200": { description: "Per-node outcome", schema: resultsSchema() } },
      handler: async (c) =>
        await eachNode(
          ctx,
          c,
          { nodeIds: body<{ node_ids: string[] }>(c).node_ids, action: "delete" },
          async (tx, id) => ({ name: (await deleteNode(tx, id)).name, details: {} }),
        ),
    }),
  ];
}
