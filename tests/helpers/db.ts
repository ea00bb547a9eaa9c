/**
 * Test databases: one migrated template per driver, cloned for each test (PGlite via dumpDataDir /
 * loadDataDir, PostgreSQL via CREATE DATABASE … TEMPLATE). The PostgreSQL variant runs only when
 * SVC_TEST_DATABASE_URL is set; the PGlite variant always runs. Same test bodies, two drivers.
 */
import postgres from "postgres";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { type Db, migrate, openPglite, openPostgres, readMigrations } from "../../server/db/mod.ts";

/** Drivers the suite exercises on this machine. */
export type Driver = "pglite" | "postgres";

/** The PostgreSQL admin URL for tests, when enabled. */
export const TEST_DATABASE_URL = Deno.env.get("SVC_TEST_DATABASE_URL") ?? "";

/** Drivers enabled for this run. */
export const DRIVERS: Driver[] = TEST_DATABASE_URL ? ["pglite", "postgres"] : ["pglite"];

if (!TEST_DATABASE_URL) {
  console.log(
    "note: PostgreSQL variants and PostgreSQL-only tests are skipped: set SVC_TEST_DATABASE_URL " +
      "(e.g. postgres://postgres@127.0.0.1:5432/postgres, a role that may create databases)",
  );
}

/** A cloned, migrated database; `url` is set for PostgreSQL (so a server process can be pointed at it). */
export interface TestDb {
  db: Db;
  driver: Driver;
  url: string;
  /** Closes the handle and drops the clone. */
  dispose(): Promise<void>;
}

let migrationsHash: Promise<string> | undefined;

async function hashMigrations(): Promise<string> {
  const list = await readMigrations();
  const text = list.map((m) => `${m.version}\n${m.sql}`).join("\n---\n");
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest).slice(0, 6), (b) => b.toString(16).padStart(2, "0")).join("");
}

function migrationsKey(): Promise<string> {
  migrationsHash ??= hashMigrations();
  return migrationsHash;
}

let pgliteTemplate: Promise<Blob> | undefined;

/** The migrated PGlite dump, cached on disk across test files (keyed by the migrations' hash). */
function pgliteDump(): Promise<Blob> {
  pgliteTemplate ??= (async () => {
    const file = join(tmpdir(), `svc-pglite-template-${await migrationsKey()}.tar.gz`);
    try {
      return new Blob([await Deno.readFile(file)]);
    } catch {
      const db = await openPglite();
      await migrate(db);
      const dump = await db.pglite.dumpDataDir("gzip");
      await db.close();
      const tmp = `${file}.${crypto.randomUUID()}`;
      await Deno.writeFile(tmp, new Uint8Array(await dump.arrayBuffer()));
      await Deno.rename(tmp, file);
      return dump;
    }
  })();
  return pgliteTemplate;
}

let pgTemplate: Promise<string> | undefined;

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = "/" + name;
  return u.toString();
}

/**
 * Creates the migrated PostgreSQL template once. Parallel test files serialise on a session advisory lock
 * (CREATE DATABASE cannot run inside a transaction, so the transaction-scoped lock is not an option).
 */
function postgresTemplate(): Promise<string> {
  pgTemplate ??= (async () => {
    const name = `svc_test_template_${await migrationsKey()}`;
    const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
    try {
      await admin`SELECT pg_advisory_lock(7368677)`;
      const exists = await admin`SELECT 1 FROM pg_database WHERE datname = ${name}`;
      if (exists.length === 0) {
        await admin.unsafe(`DROP DATABASE IF EXISTS ${name}_build WITH (FORCE)`);
        await admin.unsafe(`CREATE DATABASE ${name}_build`);
        const db = await openPostgres(withDatabase(TEST_DATABASE_URL, `${name}_build`), { max: 2 });
        await migrate(db);
        await db.close();
        await admin.unsafe(`ALTER DATABASE ${name}_build RENAME TO ${name}`);
      }
      await admin`SELECT pg_advisory_unlock(7368677)`;
    } finally {
      await admin.end();
    }
    return name;
  })();
  return pgTemplate;
}

/** A fresh migrated database for one test. */
export async function freshDb(driver: Driver): Promise<TestDb> {
  if (driver === "pglite") {
    const db = await openPglite({ loadDataDir: await pgliteDump() });
    return { db, driver, url: "", dispose: () => db.close() };
  }
  const template = await postgresTemplate();
  const name = `svc_test_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    for (let attempt = 0;; attempt++) {
      try {
        await admin.unsafe(`CREATE DATABASE ${name} TEMPLATE ${template}`);
        break;
      } catch (err) {
        // Another clone in flight briefly holds the template; retry.
        if (attempt > 20 || !String(err).includes("being accessed")) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    await admin.end();
  }
  const url = withDatabase(TEST_DATABASE_URL, name);
  const db = await openPostgres(url, { max: 5 });
  return {
    db,
    driver,
    url,
    async dispose() {
      await db.close();
      const a = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
      try {
        await a.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await a.end();
      }
    },
  };
}

/**
 * Registers one Deno test per enabled driver, each with its own fresh database:
 * `dbTest("policies can be released", async (db) => { … })`. `drivers` narrows them (a property only one
 * database has, e.g. `["postgres"]`); a named driver that is not enabled is registered as ignored, so the
 * summary shows what did not run.
 */
export function dbTest(
  name: string,
  fn: (db: Db, t: Deno.TestContext, info: TestDb) => Promise<void>,
  options: { sanitizeResources?: boolean; sanitizeOps?: boolean; ignore?: boolean; drivers?: Driver[] } = {},
): void {
  for (const driver of options.drivers ?? DRIVERS) {
    Deno.test({
      name: `${name} [${driver}]`,
      ignore: options.ignore || !DRIVERS.includes(driver),
      sanitizeResources: options.sanitizeResources ?? false,
      sanitizeOps: options.sanitizeOps ?? false,
      async fn(t) {
        const info = await freshDb(driver);
        try {
          await fn(info.db, t, info);
        } finally {
          await info.dispose();
        }
      },
    });
  }
}
