/** REST routes for node groups, their members and enrollment tokens. */
import type { ServerContext } from "../../context.ts";
import {
  addMembers,
  createEnrollmentToken,
  createNodeGroup,
  deleteNodeGroup,
  getNodeGroup,
  listMembers,
  listNodeGroups,
  NODE_GROUP_SORT_COLUMNS,
  removeMember,
  updateNodeGroup,
} from "../../domain/node_groups.ts";
import { closedObject, type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { listQuery, listRequest, PAGE_QUERY, pageRequest, pageSchema } from "../pagination.ts";
import { auditResource, body, caller, created, queryBool, type RouteSpec, uuidParam } from "../route.ts";
import { changeById, DATE_TIME, NAME_PATTERN, readById, TEXT_PATTERN } from "./common.ts";
import { nodeGroupsRoute as route } from "./tags.ts";

const NAME: JsonSchema = { type: "string", minLength: 1, maxLength: 100, pattern: NAME_PATTERN };
const DESCRIPTION: JsonSchema = { type: "string", maxLength: 2000, pattern: TEXT_PATTERN };

const GROUP_SCHEMA: JsonSchema = objectSchema({
  id: UUID_SCHEMA,
  name: { type: "string" },
  description: { type: "string" },
  node_count: { type: "integer" },
  bindings_count: { type: "integer" },
  enabled_bindings_count: { type: "integer" },
  created_at: DATE_TIME,
  updated_at: DATE_TIME,
});

const MEMBER_SCHEMA: JsonSchema = objectSchema({
  node_id: UUID_SCHEMA,
  name: { type: "string" },
  fqdn: { type: "string" },
  status: { type: "string" },
  added_at: DATE_TIME,
});

/** Routes of the node-group area. */
export function nodeGroupRoutes({ db }: ServerContext): RouteSpec[] {
  return [
    route("GET /api/v1/node-groups", "node_group:view", {
      summary: "List node groups with member and binding counts",
      query: {
        ...listQuery(NODE_GROUP_SORT_COLUMNS),
        search: { type: "string", maxLength: 200 },
      },
      responses: { "200": { description: "A page of node groups", schema: pageSchema(GROUP_SCHEMA) } },
      handler: async (c) =>
        c.json(
          await listNodeGroups(db, { search: c.req.query("search") }, listRequest(c)),
        ),
    }),
    route("POST /api/v1/node-groups", "node_group:create", {
      summary: "Create a node group",
      audit: { resourceType: "node_group" },
      body: closedObject({ name: NAME, description: DESCRIPTION }, ["name"]),
      responses: { "201": { description: "The node group", schema: GROUP_SCHEMA } },
      handler: (c) => {
        const input = body<{ name: string; description?: string }>(c);
        return created(c, {
          name: input.name,
          create: () => db.transaction((tx) => createNodeGroup(tx, input)),
        });
      },
    }),
    route("GET /api/v1/node-groups/:id", "node_group:view", {
      summary: "Read a node group",
      responses: { "200": { description: "The node group", schema: GROUP_SCHEMA } },
      handler: readById(db, getNodeGroup),
    }),
    route("PUT /api/v1/node-groups/:id", "node_group:edit", {
      summary: "Rename or re-describe a node group",
      audit: { resourceType: "node_group" },
      body: closedObject({ name: NAME, description: DESCRIPTION }),
      responses: { "200": { description: "The node group", schema: GROUP_SCHEMA } },
      handler: changeById(db, (tx, id, c) => updateNodeGroup(tx, id, body(c)), {
        track: { read: getNodeGroup, fields: ["name", "description"] },
      }),
    }),
    route("DELETE /api/v1/node-groups/:id", "node_group:delete", {
      summary:
        "Delete a node group; refused while it has bindings or members unless force=true (which removes them too)",
      audit: { resourceType: "node_group" },
      query: { force: { type: "boolean" } },
      responses: { "204": { description: "Deleted" } },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const force = queryBool(c, "force") ?? false;
        const group = await db.transaction((tx) => deleteNodeGroup(tx, id, { force }));
        auditResource(c, { id, name: group.name });
        if (force) {
          c.set("auditDetails", {
            force,
            bindings_removed: group.bindings_count,
            members_removed: group.node_count,
          });
        }
        return c.body(null, 204);
      },
    }),
    route("GET /api/v1/node-groups/:id/members", "node_group:view", {
      summary: "List the nodes in a node group",
      query: { ...PAGE_QUERY },
      responses: { "200": { description: "A page of members", schema: pageSchema(MEMBER_SCHEMA) } },
      handler: async (c) => c.json(await listMembers(db, uuidParam(c, "id"), { page: pageRequest(c) })),
    }),
    route("POST /api/v1/node-groups/:id/members", "node_group:edit", {
      summary: "Add nodes to a node group (no resync: agents see it at their next reconnect)",
      audit: { resourceType: "node_group", action: "node_group.add_members" },
      body: closedObject({ node_ids: { type: "array", minItems: 1, maxItems: 1000, items: UUID_SCHEMA } }, [
        "node_ids",
      ]),
      responses: {
        "200": {
          description: "Nodes that were added (already-present members are left as they are)",
          schema: objectSchema({ added: { type: "array", items: UUID_SCHEMA } }),
        },
      },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const { node_ids } = body<{ node_ids: string[] }>(c);
        const added = await db.transaction(async (tx) => {
          const group = await getNodeGroup(tx, id);
          auditResource(c, { id, name: group.name });
          return await addMembers(tx, id, node_ids.map((n) => n.toLowerCase()));
        });
        c.set("auditDetails", { added });
        return c.json({ added });
      },
    }),
    route("DELETE /api/v1/node-groups/:id/members/:nodeId", "node_group:edit", {
      summary: "Remove a node from a node group (no resync)",
      audit: { resourceType: "node_group", action: "node_group.remove_member" },
      responses: { "204": { description: "Removed" } },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const nodeId = uuidParam(c, "nodeId");
        await db.transaction(async (tx) => {
          const group = await getNodeGroup(tx, id);
          auditResource(c, { id, name: group.name });
          await removeMember(tx, id, nodeId);
        });
        c.set("auditDetails", { node_id: nodeId });
        return c.body(null, 204);
      },
    }),
    route("POST /api/v1/node-groups/:id/tokens", "node_group:create", {
      summary: "Create a one-time enrollment token for the group (plaintext returned once, valid 5 minutes)",
      audit: { resourceType: "node_group", action: "enrollment_token.create" },
      responses: {
        "201": {
          description: "The token; only its SHA-256 is stored, so it cannot be shown again",
          schema: {
            type: "object",
            required: ["token", "node_group_id", "expires_at"],
            properties: { token: { type: "string" }, node_group_id: UUID_SCHEMA, expires_at: DATE_TIME },
          },
        },
      },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const token = await db.transaction(async (tx) => {
          const group = await getNodeGroup(tx, id);
          auditResource(c, { id, name: group.name });
          return await createEnrollmentToken(tx, id, { createdBy: caller(c).username });
        });
        c.set("auditDetails", { expires_at: token.expires_at.toISOString() });
        c.header("Cache-Control", "no-store");
        return c.json(token, 201);
      },
    }),
  ];
}
