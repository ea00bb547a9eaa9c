/**
 * Catalogues reported by agents: the GSettings schemas and polkit actions installed on a node. They feed the
 * Dconf and Polkit editors. Shared rows are keyed by schema or action id; what each node has is stored per
 * node and replaced by every report. Entries shipped with the server (`source = 'builtin'`) are never
 * overwritten by an agent: an agent may add what the server does not know, not rewrite what it does.
 */
import type { Db, Queryable } from "../db/db.ts";
import type {
  GSettingsSchema,
  PolkitAction,
  ReportPolkitCatalogueRequest,
  ReportSchemaCatalogueRequest,
} from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { checkCount, checkText, invalid } from "./validate.ts";

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const MAX_SCHEMAS = 20_000;
const MAX_KEYS_PER_SCHEMA = 2_000;
const MAX_ACTIONS = 20_000;
/** Implicit authorizations polkit knows (empty = not stated). */
const IMPLICIT_AUTHORIZATIONS = new Set([
  "",
  "no",
  "yes",
  "auth_self",
  "auth_self_keep",
  "auth_admin",
  "auth_admin_keep",
]);

function checkId(field: string, value: string): string {
  checkText(field, value, { max: 255, required: true });
  if (!ID_PATTERN.test(value)) {
    throw invalid(
      field,
      `"${value}" is not a valid id (letters, digits, '.', '_' and '-', starting with a letter or digit)`,
    );
  }
  return value;
}

/** Keeps the last occurrence of each id (a node may list a schema twice; the later one wins). */
function lastById<T>(items: readonly T[], id: (item: T) => string): T[] {
  return [...new Map(items.map((item) => [id(item), item])).values()];
}

function schemaRow(schema: GSettingsSchema, i: number) {
  const at = `schemas[${i}]`;
  checkId(`${at}.schema_id`, schema.schemaId);
  checkText(`${at}.path`, schema.path, { max: 1024 });
  checkCount(`${at}.keys`, schema.keys, MAX_KEYS_PER_SCHEMA);
  const keys = schema.keys.map((k, j) => {
    const kat = `${at}.keys[${j}]`;
    checkText(`${kat}.name`, k.name, { max: 255, required: true });
    checkText(`${kat}.type`, k.type, { max: 255 });
    checkText(`${kat}.summary`, k.summary, { max: 4096, multiline: true });
    checkText(`${kat}.description`, k.description, { max: 16_384, multiline: true });
    checkText(`${kat}.default_value`, k.defaultValue, { max: 16_384, multiline: true });
    checkText(`${kat}.range_min`, k.rangeMin, { max: 255 });
    checkText(`${kat}.range_max`, k.rangeMax, { max: 255 });
    checkCount(`${kat}.enum_values`, k.enumValues, 1_000);
    checkCount(`${kat}.choices`, k.choices, 1_000);
    k.enumValues.forEach((e, n) => checkText(`${kat}.enum_values[${n}].nick`, e.nick, { max: 255 }));
    k.choices.forEach((c, n) => checkText(`${kat}.choices[${n}]`, c, { max: 1024 }));
    return {
      name: k.name,
      type: k.type,
      summary: k.summary,
      description: k.description,
      default_value: k.defaultValue,
      enum_values: k.enumValues.map((e) => ({ nick: e.nick, value: e.value })),
      range_min: k.rangeMin,
      range_max: k.rangeMax,
      choices: k.choices,
      flags: k.flags,
    };
  });
  return { schema_id: schema.schemaId, path: schema.path, relocatable: schema.relocatable, keys };
}

/** Stores a node's GSettings schema catalogue (and its GNOME version); all or nothing. */
export async function storeSchemaCatalogue(
  db: Db,
  nodeId: string,
  request: ReportSchemaCatalogueRequest,
): Promise<void> {
  checkText("gnome_version", request.gnomeVersion, { max: 64 });
  checkCount("schemas", request.schemas, MAX_SCHEMAS);
  const rows = lastById(request.schemas.map(schemaRow), (r) => r.schema_id);
  await db.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO dconf_schemas (schema_id, path, relocatable, keys, source, updated_at)
       SELECT x.schema_id, x.path, x.relocatable, x.keys, 'agent', now()
       FROM jsonb_to_recordset($1::text::jsonb) AS x(schema_id text, path text, relocatable boolean, keys jsonb)
       ON CONFLICT (schema_id) DO UPDATE SET path = excluded.path, relocatable = excluded.relocatable,
         keys = excluded.keys, updated_at = now()
       WHERE dconf_schemas.source = 'agent'`,
      [JSON.stringify(rows)],
    );
    await replaceNodeEntries(tx, "node_dconf_schemas", "schema_id", nodeId, rows.map((r) => r.schema_id));
    await tx.query("UPDATE nodes SET gnome_version = $2, updated_at = now() WHERE id = $1", [
      nodeId,
      request.gnomeVersion,
    ]);
  });
}

/**
 * Makes `ids` the whole list of catalogue entries `nodeId` reported in the link table `table` (`column` holds
 * the entry's id): the node's old list is dropped, so an entry the node no longer has stops counting for it.
 */
async function replaceNodeEntries(
  tx: Queryable,
  table: "node_dconf_schemas" | "node_polkit_actions",
  column: "schema_id" | "action_id",
  nodeId: string,
  ids: string[],
): Promise<void> {
  await tx.query(`DELETE FROM ${table} WHERE node_id = $1`, [nodeId]);
  await tx.query(`INSERT INTO ${table} (node_id, ${column}) SELECT $1, unnest($2::text[])`, [nodeId, ids]);
}

function actionRow(action: PolkitAction, i: number) {
  const at = `actions[${i}]`;
  checkId(`${at}.action_id`, action.actionId);
  checkText(`${at}.description`, action.description, { max: 4096, multiline: true });
  checkText(`${at}.message`, action.message, { max: 4096, multiline: true });
  checkText(`${at}.vendor`, action.vendor, { max: 255 });
  for (
    const [field, value] of [
      ["default_any", action.defaultAny],
      ["default_inactive", action.defaultInactive],
      ["default_active", action.defaultActive],
    ] as const
  ) {
    if (!IMPLICIT_AUTHORIZATIONS.has(value)) {
      throw invalid(`${at}.${field}`, `"${value.slice(0, 64)}" is not a polkit implicit authorization`);
    }
  }
  return {
    action_id: action.actionId,
    description: action.description,
    message: action.message,
    vendor: action.vendor,
    default_any: action.defaultAny,
    default_inactive: action.defaultInactive,
    default_active: action.defaultActive,
  };
}

/** Stores a node's polkit action catalogue; all or nothing. */
export async function storePolkitCatalogue(
  db: Db,
  nodeId: string,
  request: ReportPolkitCatalogueRequest,
): Promise<void> {
  checkCount("actions", request.actions, MAX_ACTIONS);
  const rows = lastById(request.actions.map(actionRow), (r) => r.action_id);
  await db.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO polkit_actions (action_id, description, message, vendor, default_any, default_inactive,
         default_active, source, updated_at)
       SELECT x.action_id, x.description, x.message, x.vendor, x.default_any, x.default_inactive, x.default_active,
         'agent', now()
       FROM jsonb_to_recordset($1::text::jsonb) AS x(action_id text, description text, message text, vendor text,
         default_any text, default_inactive text, default_active text)
       ON CONFLICT (action_id) DO UPDATE SET description = excluded.description, message = excluded.message,
         vendor = excluded.vendor, default_any = excluded.default_any, default_inactive = excluded.default_inactive,
         default_active = excluded.default_active, updated_at = now()
       WHERE polkit_actions.source = 'agent'`,
      [JSON.stringify(rows)],
    );
    await replaceNodeEntries(tx, "node_polkit_actions", "action_id", nodeId, rows.map((r) => r.action_id));
  });
}
