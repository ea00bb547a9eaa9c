/**
 * Applies `migrations/NNNN_name.sql` in order, each once, each in its own transaction, under a
 * transaction-scoped advisory lock so replicas starting together never race: the second waits, then finds
 * the migration recorded and skips it.
 */
import type { Db } from "./db.ts";

/** Advisory lock key for migrations ("svc-migr" as ASCII bytes). */
const MIGRATION_LOCK_KEY = 0x7376632d6d696772n;

/** A migration file. */
export interface Migration {
  version: string;
  name: string;
  sql: string;
}

/** The repository's migrations directory. */
export const MIGRATIONS_DIR = new URL("../../migrations/", import.meta.url);

/**
 * Migrations compiled into a bundled build (`packaging/program.ts` generates a module that calls
 * {@link embedMigrations}); when present they replace the directory, which a packaged server does not have.
 */
let embedded: Migration[] | undefined;

/** Makes {@link migrate} use `list` instead of reading {@link MIGRATIONS_DIR} (bundled builds only). */
export function embedMigrations(list: Migration[]): void {
  embedded = list;
}

/** Reads migration files from a directory, sorted by version; rejects malformed names and duplicates. */
export async function readMigrations(dir: URL = MIGRATIONS_DIR): Promise<Migration[]> {
  const out: Migration[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (!entry.isFile || !entry.name.endsWith(".sql")) continue;
    const m = /^(\d{4})_([a-z0-9_]+)\.sql$/.exec(entry.name);
    if (!m) throw new Error(`migration file name ${entry.name} must look like 0001_initial_schema.sql`);
    out.push({ version: m[1], name: m[2], sql: await Deno.readTextFile(new URL(entry.name, dir)) });
  }
  out.sort((a, b) => a.version.localeCompare(b.version));
  for (let i = 1; i < out.length; i++) {
    if (out[i].version === out[i - 1].version) {
      throw new Error(`two migrations share version ${out[i].version}: renumber one of them`);
    }
  }
  return out;
}

/** Applies pending migrations; returns the versions applied by this call. */
export async function migrate(db: Db, migrations?: Migration[]): Promise<string[]> {
  const list = migrations ?? embedded ?? await readMigrations();
  await db.query(
    `CREATE TABLE IF NOT EXISTS schema_migrations (
       version text PRIMARY KEY,
       name text NOT NULL,
       applied_at timestamptz NOT NULL DEFAULT now()
     )`,
  ).catch(async (err) => {
    // Two replicas may race on CREATE TABLE IF NOT EXISTS itself (a unique violation on pg_type); the
    // loser simply finds the table there.
    const exists = await db.query(`SELECT to_regclass('schema_migrations') AS t`);
    if (!exists[0]?.t) throw err;
  });
  const applied: string[] = [];
  for (const m of list) {
    const done = await db.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK_KEY.toString()]);
      const rows = await tx.query("SELECT 1 FROM schema_migrations WHERE version = $1", [m.version]);
      if (rows.length > 0) return false;
      await execScript(tx, m.sql);
      await tx.query("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [m.version, m.name]);
      return true;
    });
    if (done) applied.push(m.version);
  }
  return applied;
}

/** Runs a multi-statement script one statement at a time (extended protocol takes one per call). */
async function execScript(tx: { query(sql: string): Promise<unknown> }, sql: string): Promise<void> {
  for (const statement of splitStatements(sql)) await tx.query(statement);
}

/**
 * Splits SQL on top-level semicolons, respecting quotes, comments and dollar-quoted bodies, so function
 * definitions survive.
 */
export function splitStatements(sql: string): string[] {
  const out: string[] = [];
  let cur = "";
  let i = 0;
  while (i < sql.length) {
    const c = sql[i];
    const rest = sql.slice(i);
    if (rest.startsWith("--")) {
      const end = sql.indexOf("\n", i);
      i = end === -1 ? sql.length : end + 1;
      continue;
    }
    if (rest.startsWith("/*")) {
      const end = sql.indexOf("*/", i + 2);
      i = end === -1 ? sql.length : end + 2;
      continue;
    }
    if (c === "'" || c === '"') {
      const end = sql.indexOf(c, i + 1);
      const stop = end === -1 ? sql.length : end + 1;
      cur += sql.slice(i, stop);
      i = stop;
      continue;
    }
    const dollar = /^\$([A-Za-z_]*)\$/.exec(rest);
    if (dollar) {
      const tag = dollar[0];
      const end = sql.indexOf(tag, i + tag.length);
      const stop = end === -1 ? sql.length : end + tag.length;
      cur += sql.slice(i, stop);
      i = stop;
      continue;
    }
    if (c === ";") {
      if (cur.trim()) out.push(cur.trim());
      cur = "";
      i++;
      continue;
    }
    cur += c;
    i++;
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}
