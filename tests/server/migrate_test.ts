import assert from "node:assert/strict";
import { migrate, openPglite, openPostgres, readMigrations } from "../../server/db/mod.ts";
import { splitStatements } from "../../server/db/migrate.ts";
import { dbTest, freshDb, TEST_DATABASE_URL } from "../helpers/db.ts";
import postgres from "postgres";

dbTest("migrating an up-to-date database is a no-op", async (db) => {
  assert.deepEqual(await migrate(db), []);
  const rows = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM schema_migrations");
  assert.equal(rows[0].n, (await readMigrations()).length);
});

dbTest("schema protects its invariants", async (db) => {
  await db.query("INSERT INTO nodes (name) VALUES ('n1')");
  await assert.rejects(db.query("INSERT INTO nodes (name) VALUES ('n1')"), /unique|duplicate/i);
  await assert.rejects(db.query("INSERT INTO nodes (name) VALUES ('../etc')"), /check/i);
  const [g] = await db.query<{ id: string }>("INSERT INTO node_groups (name) VALUES ('g') RETURNING id");
  const [p] = await db.query<{ id: string }>(
    "INSERT INTO policies (name, type, content) VALUES ('p', 'Firefox', '{}') RETURNING id",
  );
  await db.query("INSERT INTO policy_bindings (policy_id, node_group_id) VALUES ($1, $2)", [p.id, g.id]);
  await assert.rejects(
    db.query("INSERT INTO policy_bindings (policy_id, node_group_id) VALUES ($1, $2)", [p.id, g.id]),
    /unique|duplicate/i,
  );
  await assert.rejects(
    db.query("INSERT INTO policy_bindings (policy_id, node_group_id) VALUES ($1, gen_random_uuid())", [p.id]),
    /foreign key/i,
  );
  const [b] = await db.query<{ state: string }>("SELECT state FROM policy_bindings");
  assert.equal(b.state, "disabled");
});

dbTest("a failing transaction leaves nothing behind and drops its notifications", async (db) => {
  const got: string[] = [];
  const unlisten = await db.listen("svc_test", (p) => got.push(p));
  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.query("INSERT INTO node_groups (name) VALUES ('x')");
      await tx.query("SELECT pg_notify('svc_test', 'rolled-back')");
      throw new Error("boom");
    }),
  );
  await db.transaction(async (tx) => {
    await tx.query("SELECT pg_notify('svc_test', 'committed')");
  });
  for (let i = 0; i < 50 && got.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(got, ["committed"]);
  assert.equal((await db.query("SELECT * FROM node_groups WHERE name = 'x'")).length, 0);
  await unlisten();
});

Deno.test("a fresh embedded database migrates once; a second run applies nothing", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const db = await openPglite({ dataDir: dir });
    const first = await migrate(db);
    assert.equal(first.length, (await readMigrations()).length);
    await db.close();
    const again = await openPglite({ dataDir: dir });
    assert.deepEqual(await migrate(again), []);
    await again.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "two servers migrating one PostgreSQL at once do not race",
  ignore: !TEST_DATABASE_URL,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const name = `svc_race_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
    await admin.unsafe(`CREATE DATABASE ${name}`);
    const u = new URL(TEST_DATABASE_URL);
    u.pathname = "/" + name;
    try {
      const dbs = await Promise.all([0, 1, 2].map(() => openPostgres(u.toString(), { max: 2 })));
      const results = await Promise.all(dbs.map((d) => migrate(d)));
      const all = results.flat().sort();
      const versions = (await readMigrations()).map((m) => m.version).sort();
      assert.deepEqual(all, versions, "each migration applied exactly once across replicas");
      await Promise.all(dbs.map((d) => d.close()));
    } finally {
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
  },
});

Deno.test("statement splitter keeps dollar-quoted bodies and ignores comments", () => {
  const parts = splitStatements(
    "-- a; comment\nCREATE TABLE a (x text DEFAULT ';');\nCREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql;\n/* ; */",
  );
  assert.equal(parts.length, 2);
  assert.match(parts[1], /\$\$ SELECT 1; \$\$/);
});

Deno.test("fresh test databases are independent clones", async () => {
  const a = await freshDb("pglite");
  const b = await freshDb("pglite");
  await a.db.query("INSERT INTO node_groups (name) VALUES ('only-in-a')");
  assert.equal((await b.db.query("SELECT 1 FROM node_groups")).length, 0);
  await a.dispose();
  await b.dispose();
});
