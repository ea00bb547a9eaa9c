/**
 * The merged GSettings catalogue the Dconf editor picks from: the schemas agents reported (stored per node by
 * `server/grpc/catalogues.ts`) over the built-in catalogue shipped with the server
 * (`server/catalogues/gsettings_builtin.json`, generated at dev time by `packaging/gen_gsettings_catalogue.ts`
 * from Debian's gsettings-desktop-schemas and GTK schemas), so the editor works before any agent reports. A
 * schema an agent reported is described by the agent's copy (it is what nodes really have); each schema says
 * on how many nodes it exists.
 */
import type { Queryable } from "../db/db.ts";
import builtin from "../catalogues/gsettings_builtin.json" with { type: "json" };
import { DomainError } from "../core/errors.ts";

/** One key as the REST API shows it. */
export interface GSettingsKeyRecord {
  name: string;
  type: string;
  summary: string;
  description: string;
  default_value: string;
  enum_values: { nick: string; value: number }[];
  range_min: string;
  range_max: string;
  choices: string[];
  flags: boolean;
}

/** One schema of the merged catalogue. */
export interface GSettingsSchemaRecord {
  schema_id: string;
  path: string;
  relocatable: boolean;
  /** Nodes whose last report lists the schema. */
  node_count: number;
  /** Shipped with the server. */
  builtin: boolean;
  keys: GSettingsKeyRecord[];
}

/** A search hit: the schema without key details, plus the keys that matched. */
export interface GSettingsSchemaSummary {
  schema_id: string;
  path: string;
  relocatable: boolean;
  node_count: number;
  builtin: boolean;
  key_count: number;
  /** Keys whose name or summary matched the search (all keys when the schema id matched), at most 20. */
  matching_keys: { name: string; type: string; summary: string }[];
}

interface BuiltinKey {
  name: string;
  type: string;
  summary: string;
  description: string;
  defaultValue: string;
  enumValues: { nick: string; value: number }[];
  rangeMin: string;
  rangeMax: string;
  choices: string[];
  flags: boolean;
}

/** Where the built-in catalogue came from. */
export const BUILTIN_SOURCE: string = builtin.source;

const BUILTIN: ReadonlyMap<string, GSettingsSchemaRecord> = new Map(
  builtin.schemas.map((s) => [s.schemaId, {
    schema_id: s.schemaId,
    path: s.path,
    relocatable: s.relocatable,
    node_count: 0,
    builtin: true,
    keys: (s.keys as BuiltinKey[]).map((k) => ({
      name: k.name,
      type: k.type,
      summary: k.summary,
      description: k.description,
      default_value: k.defaultValue,
      enum_values: k.enumValues,
      range_min: k.rangeMin,
      range_max: k.rangeMax,
      choices: k.choices,
      flags: k.flags,
    })),
  }]),
);

async function merged(q: Queryable, schemaId?: string): Promise<Map<string, GSettingsSchemaRecord>> {
  const rows = await q.query<{
    schema_id: string;
    path: string;
    relocatable: boolean;
    keys: GSettingsKeyRecord[] | string;
    node_count: number;
  }>(
    `SELECT s.schema_id, s.path, s.relocatable, s.keys,
       (SELECT count(*)::int FROM node_dconf_schemas n WHERE n.schema_id = s.schema_id) AS node_count
     FROM dconf_schemas s WHERE $1::text IS NULL OR s.schema_id = $1`,
    [schemaId ?? null],
  );
  const out = new Map<string, GSettingsSchemaRecord>();
  for (const [id, record] of BUILTIN) if (schemaId === undefined || id === schemaId) out.set(id, record);
  for (const row of rows) {
    const keys = typeof row.keys === "string" ? JSON.parse(row.keys) : row.keys;
    out.set(row.schema_id, {
      schema_id: row.schema_id,
      path: row.path,
      relocatable: row.relocatable,
      node_count: row.node_count,
      builtin: BUILTIN.has(row.schema_id),
      keys: [...keys].sort((a: GSettingsKeyRecord, b: GSettingsKeyRecord) => (a.name < b.name ? -1 : 1)),
    });
  }
  return out;
}

/**
 * Searches the merged catalogue by schema id, key name and key summary (case-insensitive substring; empty
 * finds everything), schemas present on more nodes first, then by id.
 */
export async function searchGSettingsSchemas(
  q: Queryable,
  options: { query?: string; limit?: number } = {},
): Promise<{ total: number; nodes_reporting: number; items: GSettingsSchemaSummary[] }> {
  const needle = (options.query ?? "").trim().toLowerCase();
  const all = [...(await merged(q)).values()];
  const hits: GSettingsSchemaSummary[] = [];
  for (const s of all) {
    const idMatch = needle === "" || s.schema_id.toLowerCase().includes(needle);
    const keys = idMatch
      ? s.keys
      : s.keys.filter((k) =>
        k.name.toLowerCase().includes(needle) || k.summary.toLowerCase().includes(needle)
      );
    if (!idMatch && keys.length === 0) continue;
    hits.push({
      schema_id: s.schema_id,
      path: s.path,
      relocatable: s.relocatable,
      node_count: s.node_count,
      builtin: s.builtin,
      key_count: s.keys.length,
      matching_keys: keys.slice(0, 20).map((k) => ({ name: k.name, type: k.type, summary: k.summary })),
    });
  }
  hits.sort((a, b) => b.node_count - a.node_count || (a.schema_id < b.schema_id ? -1 : 1));
  const reporting = await q.query<{ n: number }>(
    "SELECT count(DISTINCT node_id)::int AS n FROM node_dconf_schemas",
  );
  return {
    total: hits.length,
    nodes_reporting: reporting[0]?.n ?? 0,
    items: hits.slice(0, options.limit ?? 50),
  };
}

/** One schema with every key; throws a not-found DomainError naming the id. */
export async function getGSettingsSchema(q: Queryable, schemaId: string): Promise<GSettingsSchemaRecord> {
  const found = (await merged(q, schemaId)).get(schemaId);
  if (!found) {
    throw new DomainError("not_found", `GSettings schema ${schemaId} is not in the catalogue`);
  }
  return found;
}
