/**
 * REST routes of disk encryption: the fleet inventory, one node's view, the audited recovery-key reveal, a
 * manual rotation request and the KEK re-wrap. The reveal needs `disk_encryption:reveal`, a reason and a
 * step-up re-authentication; every attempt, refused or not, leaves a high-severity audit row (action
 * `disk_encryption.reveal`; a caller without the permission leaves `access_denied`).
 */
import type { ServerContext } from "../../context.ts";
import { createStepUp } from "../../auth/step_up.ts";
import { checkStepUp, STEP_UP_PROPERTIES } from "../step_up.ts";
import { createSecretSealer } from "../../auth/mfa.ts";
import { KekError } from "../../pki/envelope.ts";
import { requestRotation, revealKey, rewrapAll } from "../../disk_encryption/escrow.ts";
import {
  ESCROW_STATES,
  listInventory,
  nodeView,
  VOLUME_COMPLIANCE,
} from "../../disk_encryption/inventory.ts";
import { keyringFor, reloadKeyring } from "../../disk_encryption/kek.ts";
import { sendNodeCommand } from "../../events/hub_notice.ts";
import { notFoundError } from "../../core/errors.ts";
import { HttpError } from "../errors.ts";
import { closedObject, type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { PAGE_QUERY, pageRequest, pageSchema } from "../pagination.ts";
import { auditResource, body, queryBool, type RouteSpec, uuidParam } from "../route.ts";
import { DATE_TIME, TEXT_PATTERN } from "./common.ts";
import { diskEncryptionRoute as route } from "./tags.ts";

/** How long the UI shows a revealed key before hiding it again. */
export const REVEAL_DISPLAY_SECONDS = 120;

const NULLABLE_TIME: JsonSchema = { ...DATE_TIME, type: ["string", "null"] };
const NAMED_REF: JsonSchema = objectSchema({ id: UUID_SCHEMA, name: { type: "string" } });
const STRINGS: JsonSchema = { type: "array", items: { type: "string" } };

/** One volume as the inventory lists it (never key material). */
const VOLUME_SCHEMA: JsonSchema = objectSchema({
  id: UUID_SCHEMA,
  node_id: { type: ["string", "null"], format: "uuid" },
  node_name: { type: "string" },
  luks_uuid: { type: "string" },
  device: { type: "string" },
  mapper_name: { type: "string" },
  mount_point: { type: "string" },
  root: { type: "boolean" },
  encrypted: { type: "boolean" },
  luks_version: { type: "integer" },
  cipher: { type: "string" },
  key_size_bits: { type: "integer" },
  pbkdf: { type: "string" },
  key_slots: {
    type: "array",
    items: objectSchema({
      slot: { type: "integer" },
      kind: { type: "string" },
      managed: { type: "boolean" },
    }),
  },
  protectors: STRINGS,
  tpm2_enrolled: { type: "boolean" },
  tpm2_pcrs: { type: "array", items: { type: "integer" } },
  tang_enrolled: { type: "boolean" },
  escrow_state: { type: "string", enum: [...ESCROW_STATES] },
  active_key_id: { type: ["string", "null"], format: "uuid" },
  active_key_confirmed_at: NULLABLE_TIME,
  rotation_requested_at: NULLABLE_TIME,
  rotation_reason: { type: "string" },
  overdue: { type: "boolean" },
  clone: { type: "boolean" },
  compliance: { type: "string", enum: [...VOLUME_COMPLIANCE] },
  issues: STRINGS,
  policy: { ...NAMED_REF, type: ["object", "null"] },
  reported_at: DATE_TIME,
  missing_since: NULLABLE_TIME,
});

/** Counts over every volume the filters match (not only the page's), for the summary cards. */
const INVENTORY_SUMMARY_SCHEMA: JsonSchema = objectSchema(
  Object.fromEntries(
    ["volumes", "unencrypted", "escrowed", "non_compliant", "overdue", "clones"].map((
      name,
    ) => [name, { type: "integer", minimum: 0 }]),
  ),
);

/** One node's disk encryption: facts, effective policy, volumes with their key history, pending tasks. */
const NODE_VIEW_SCHEMA: JsonSchema = objectSchema({
  node: NAMED_REF,
  reported_at: NULLABLE_TIME,
  tpm2_available: { type: "boolean" },
  external_manager: { type: "string" },
  policy: { ...NAMED_REF, type: ["object", "null"] },
  volumes: {
    type: "array",
    items: objectSchema({
      ...VOLUME_SCHEMA.properties,
      keys: {
        type: "array",
        items: objectSchema({
          id: UUID_SCHEMA,
          state: { type: "string" },
          key_slot: { type: ["integer", "null"] },
          reveal_count: { type: "integer" },
          last_revealed_at: NULLABLE_TIME,
          created_at: DATE_TIME,
          confirmed_at: NULLABLE_TIME,
          retired_at: NULLABLE_TIME,
        }),
      },
    }),
  },
  tasks: {
    type: "array",
    items: objectSchema({
      id: UUID_SCHEMA,
      kind: { type: "string" },
      volume_id: { type: ["string", "null"], format: "uuid" },
      reason: { type: "string" },
      created_at: DATE_TIME,
    }),
  },
});

const RECOVERY_KEY_SCHEMA: JsonSchema = objectSchema({
  key_id: UUID_SCHEMA,
  recovery_key: { type: "string" },
  alternate_keys: {
    type: "array",
    items: objectSchema({ key_id: UUID_SCHEMA, recovery_key: { type: "string" } }),
  },
  volume_uuid: { type: "string" },
  node_name: { type: "string" },
  rotation_scheduled: { type: "boolean" },
  display_seconds: { type: "integer" },
});

/** Runs `fn`; a missing or non-matching KEK becomes 503 naming the file and the fix. */
async function withKek<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof KekError) throw new HttpError(503, "kek_unavailable", err.message);
    throw err;
  }
}

/** Routes of the disk-encryption area. */
export function diskEncryptionRoutes(ctx: ServerContext): RouteSpec[] {
  const { db } = ctx;
  const stepUp = createStepUp(ctx.db, createSecretSealer(ctx.totpKey, ctx.config.security.jwtSecret), {
    directory: ctx.config.ldap,
  });
  return [
    route("GET /api/v1/disk-encryption/volumes", "disk_encryption:view", {
      summary: "Fleet inventory of volumes: escrow state, protectors, compliance, overdue rotations, clones",
      query: {
        ...PAGE_QUERY,
        node: UUID_SCHEMA,
        group: UUID_SCHEMA,
        compliance: { type: "string", enum: [...VOLUME_COMPLIANCE] },
        escrow: { type: "string", enum: [...ESCROW_STATES] },
        overdue: { type: "boolean" },
        clone: { type: "boolean" },
      },
      responses: {
        "200": {
          description: "A page of volumes",
          schema: pageSchema(VOLUME_SCHEMA, { summary: INVENTORY_SUMMARY_SCHEMA }),
        },
      },
      handler: async (c) =>
        c.json(
          await listInventory(db, {
            nodeId: c.req.query("node")?.toLowerCase(),
            groupId: c.req.query("group")?.toLowerCase(),
            compliance: c.req.query("compliance") as (typeof VOLUME_COMPLIANCE)[number] | undefined,
            escrow: c.req.query("escrow") as (typeof ESCROW_STATES)[number] | undefined,
            overdue: queryBool(c, "overdue"),
            clone: queryBool(c, "clone"),
          }, pageRequest(c)),
        ),
    }),
    route("GET /api/v1/disk-encryption/nodes/:id", "disk_encryption:view", {
      summary: "One node's disk encryption: facts, policy, volumes, key history (no key material), tasks",
      responses: { "200": { description: "The node's disk encryption", schema: NODE_VIEW_SCHEMA } },
      handler: async (c) => c.json(await nodeView(db, uuidParam(c, "id"))),
    }),
    route("POST /api/v1/disk-encryption/volumes/:id/reveal", "disk_encryption:reveal", {
      summary: "Reveal the active recovery key of a volume (reason and re-authentication required; audited)",
      audit: { resourceType: "luks_volume", action: "disk_encryption.reveal" },
      body: closedObject({
        reason: { type: "string", minLength: 3, maxLength: 1000, pattern: TEXT_PATTERN },
        ...STEP_UP_PROPERTIES,
      }, ["reason"]),
      responses: {
        "200": { description: "The recovery key (shown, never stored)", schema: RECOVERY_KEY_SCHEMA },
      },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const input = body<{ reason: string }>(c);
        if (input.reason.trim().length < 3) {
          throw new HttpError(
            400,
            "bad_request",
            "reason: say why the key is needed (at least 3 characters)",
            [
              { field: "reason", message: "must say why the key is needed" },
            ],
          );
        }
        c.set("auditDetails", { reason: input.reason });
        await checkStepUp(stepUp, db, c);
        const reveal = await withKek(async () => {
          const kr = await keyringFor(ctx.config);
          return await db.transaction((tx) => revealKey(tx, kr, id));
        });
        auditResource(c, { id, name: `${reveal.nodeName}:${reveal.volumeUuid}` });
        c.set("auditDetails", {
          reason: input.reason,
          key_id: reveal.keyId,
          ...(reveal.alternates.length ? { alternate_key_ids: reveal.alternates.map((a) => a.keyId) } : {}),
          node: reveal.nodeName,
          volume_uuid: reveal.volumeUuid,
          rotation_scheduled: reveal.rotationScheduled,
        });
        c.header("cache-control", "no-store");
        return c.json({
          key_id: reveal.keyId,
          recovery_key: reveal.recoveryKey,
          alternate_keys: reveal.alternates.map((a) => ({ key_id: a.keyId, recovery_key: a.recoveryKey })),
          volume_uuid: reveal.volumeUuid,
          node_name: reveal.nodeName,
          rotation_scheduled: reveal.rotationScheduled,
          display_seconds: REVEAL_DISPLAY_SECONDS,
        });
      },
    }),
    route("POST /api/v1/disk-encryption/volumes/:id/rotate", "disk_encryption:reveal", {
      summary: "Ask the node to replace the volume's recovery key",
      audit: { resourceType: "luks_volume", action: "disk_encryption.rotate" },
      body: closedObject({ reason: { type: "string", maxLength: 1000, pattern: TEXT_PATTERN } }),
      responses: {
        "200": {
          description: "The rotation is requested",
          schema: objectSchema({ rotation_requested: { type: "boolean", enum: [true] } }),
        },
      },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const reason = body<{ reason?: string }>(c).reason?.trim() ||
          "rotation requested by an administrator";
        const out = await db.transaction(async (tx) => {
          const [v] = await tx.query<{ node_id: string | null; node_name: string; luks_uuid: string }>(
            "SELECT node_id, node_name, luks_uuid FROM luks_volumes WHERE id = $1 AND luks_version > 0",
            [id],
          );
          if (!v) throw notFoundError(`encrypted volume ${id}`);
          if (await requestRotation(tx, id, reason) && v.node_id) {
            await sendNodeCommand(tx, v.node_id, "disk_encryption_task");
          }
          return v;
        });
        auditResource(c, { id, name: `${out.node_name}:${out.luks_uuid}` });
        return c.json({ rotation_requested: true });
      },
    }),
    route("POST /api/v1/disk-encryption/kek/rewrap", "settings:edit", {
      summary: "Re-read the KEK file and re-wrap every data key with its first (current) key",
      audit: { resourceType: "disk_encryption_kek", action: "disk_encryption.kek_rewrap" },
      responses: {
        "200": {
          description: "How many data keys were re-wrapped, and the KEK ids still in use",
          schema: objectSchema({
            current_kek_id: { type: "string" },
            rewrapped: { type: "integer" },
            kek_ids_in_use: STRINGS,
          }),
        },
      },
      handler: async (c) => {
        reloadKeyring(ctx.config);
        const { kr, out } = await withKek(async () => {
          const kr = await keyringFor(ctx.config);
          return { kr, out: await rewrapAll(db, kr) };
        });
        auditResource(c, { id: kr.currentId, name: kr.currentId });
        c.set("auditDetails", { rewrapped: out.rewrapped, kek_ids_in_use: out.kekIdsInUse });
        return c.json({
          current_kek_id: kr.currentId,
          rewrapped: out.rewrapped,
          kek_ids_in_use: out.kekIdsInUse,
        });
      },
    }),
  ];
}
