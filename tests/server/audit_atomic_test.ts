/**
 * A change and its audit row commit together or not at all: the headline attack (a lone surrogate in a new
 * Super Admin's full name), an audit insert the database refuses (the change must vanish with it), syslog
 * hearing only of committed changes, and the unit of work underneath (savepoints, stragglers, LISTEN).
 */
import assert from "node:assert/strict";
import dgram from "node:dgram";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, serverTest } from "../helpers/app.ts";
import { builtinRoleId } from "../../server/auth/rbac.ts";
import { SUPER_ADMIN } from "../../shared/builtin_roles.ts";
import type { Db } from "../../server/db/db.ts";
import { createGroup, enrollAgent, startAgentServer } from "../helpers/agents.ts";
import { generateKeyAndCsr } from "../../shared/pki/csr.ts";
import { purgeAuditLogs } from "../../server/audit/retention.ts";

async function auditRows(db: Db, name: string) {
  return await db.query<{ action: string; outcome: string; details: Record<string, unknown> }>(
    "SELECT action, outcome, details FROM audit_logs WHERE resource_name = $1 ORDER BY id",
    [name],
  );
}

for (const [label, fullName] of [["a lone surrogate", "\udc00"], ["a NUL byte", "evil\u0000admin"]]) {
  serverTest(
    `a Super Admin created with ${label} in the full name is refused and audited`,
    async (server, db) => {
      const admin = await server.loginAs({ superAdmin: true });
      const roleId = await builtinRoleId(db, SUPER_ADMIN);
      const res = await admin.request("POST", "/api/v1/users", {
        username: "mallory",
        password: "correct-horse-battery-staple-9",
        full_name: fullName,
        role_ids: [roleId],
      });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.fields[0].field, "full_name");
      assert.match(res.json.error.message, /full_name/);
      const users = await db.query("SELECT 1 FROM users WHERE username = 'mallory'");
      assert.equal(users.length, 0, "the refused Super Admin must not exist");
      const rows = await auditRows(db, "");
      const failure = rows.filter((r) => r.details.path === "/api/v1/users" && r.outcome === "failure");
      assert.equal(failure.length, 1, "the refused request leaves exactly one failure row");
      assert.equal(failure[0].details.status, 400);
    },
  );
}

/** Makes the database refuse the success row of any change to a resource called `doomed`. */
async function refuseDoomedSuccessRows(db: Db): Promise<void> {
  await db.query(`CREATE FUNCTION test_refuse_doomed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.resource_name = 'doomed' AND NEW.outcome = 'success' THEN
        RAISE EXCEPTION 'audit row refused by the test';
      END IF;
      RETURN NEW;
    END $$`);
  await db.query(`CREATE TRIGGER test_refuse_doomed BEFORE INSERT ON audit_logs
    FOR EACH ROW EXECUTE FUNCTION test_refuse_doomed()`);
}

dbTest(
  "a change whose audit row cannot be written is rolled back, and syslog never hears of it",
  async (db) => {
    const collector = dgram.createSocket("udp4");
    const heard: string[] = [];
    collector.on("message", (msg) => heard.push(new TextDecoder().decode(msg)));
    await new Promise<void>((resolve) => collector.bind(0, "127.0.0.1", resolve));
    const server = await createTestServer({
      db,
      config: {
        audit: {
          syslog: {
            enabled: true,
            network: "udp",
            addr: `127.0.0.1:${collector.address().port}`,
            format: "cef",
            facility: 16,
            tlsCaFile: "",
          },
        },
      },
    });
    try {
      await refuseDoomedSuccessRows(db);
      const admin = await server.loginAs({ superAdmin: true });
      const doomed = await admin.request("POST", "/api/v1/user-groups", { name: "doomed", description: "x" });
      assert.equal(doomed.status, 500, doomed.text);
      assert.equal(doomed.json.error.code, "internal");
      const groups = await db.query("SELECT 1 FROM user_groups WHERE name = 'doomed'");
      assert.equal(groups.length, 0, "the change must not outlive its audit row");
      const rows = await auditRows(db, "doomed");
      assert.deepEqual(rows.map((r) => r.outcome), ["failure"]);

      const kept = await admin.request("POST", "/api/v1/user-groups", { name: "kept" });
      assert.equal(kept.status, 201, kept.text);
      // Syslog is asynchronous: wait for the committed change's message, then check the doomed one never came.
      const deadline = Date.now() + 60_000;
      while (!heard.some((m) => m.includes("kept")) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(heard.some((m) => m.includes("kept")), "the committed change reaches syslog");
      const doomedSuccess = heard.filter((m) => m.includes("doomed") && !/failure|outcome=Failure/i.test(m));
      assert.deepEqual(doomedSuccess, [], "syslog must only carry events that committed");
    } finally {
      await server.close();
      collector.close();
    }
  },
);

dbTest(
  "a nested transaction inside a unit of work is a savepoint; stragglers and LISTEN run outside",
  async (db) => {
    await db.query("CREATE TABLE test_unit (v text)");
    const heard: string[] = [];
    const unlisten = await db.listen("test_unit", (payload) => {
      // A LISTEN callback querying the database must not land in (or wait for) someone's unit of work.
      db.query("INSERT INTO test_unit VALUES ($1)", [`heard ${payload}`]).then(() => heard.push(payload));
    });
    let straggler: Promise<unknown> | undefined;
    await db.unitOfWork(async () => {
      await db.query("INSERT INTO test_unit VALUES ('outer')");
      await assert.rejects(
        db.transaction(async (tx) => {
          await tx.query("INSERT INTO test_unit VALUES ('inner')");
          throw new Error("inner refused");
        }),
        /inner refused/,
      );
      await db.transaction((tx) => tx.query("INSERT INTO test_unit VALUES ('inner kept')"));
      await db.notify("test_unit", "ping");
      // Seen inside: the unit's own uncommitted rows.
      const inside = await db.query<{ v: string }>("SELECT v FROM test_unit ORDER BY v");
      assert.deepEqual(inside.map((r) => r.v), ["inner kept", "outer"]);
      straggler = new Promise((r) => setTimeout(r, 0)).then(() =>
        db.query("INSERT INTO test_unit VALUES ('straggler')")
      );
    });
    await straggler;
    const deadline = Date.now() + 60_000;
    while (heard.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const rows = await db.query<{ v: string }>("SELECT v FROM test_unit ORDER BY v");
    assert.deepEqual(rows.map((r) => r.v), ["heard ping", "inner kept", "outer", "straggler"]);
    await assert.rejects(
      db.unitOfWork(async () => {
        await db.query("INSERT INTO test_unit VALUES ('rolled back')");
        throw new Error("refused");
      }),
      /refused/,
    );
    const after = await db.query("SELECT 1 FROM test_unit WHERE v = 'rolled back'");
    assert.equal(after.length, 0);
    await unlisten();
  },
);

dbTest("a renewed agent certificate whose audit row cannot be written is not recorded", async (db) => {
  const server = await startAgentServer(db);
  try {
    const group = await createGroup(db, "renewals");
    const agent = await enrollAgent(server, { name: "doomed", groupId: group });
    try {
      const [before] = await db.query<{ cert_serial: string }>(
        "SELECT cert_serial FROM nodes WHERE id = $1",
        [
          agent.nodeId,
        ],
      );
      await refuseDoomedSuccessRows(db);
      const { csrPem } = await generateKeyAndCsr("doomed");
      await assert.rejects(agent.policy.renewCertificate({ clientId: "doomed", csrPem }));
      const [after] = await db.query<{ cert_serial: string }>("SELECT cert_serial FROM nodes WHERE id = $1", [
        agent.nodeId,
      ]);
      assert.equal(after.cert_serial, before.cert_serial, "the node must keep its certificate");
      const certs = await db.query("SELECT 1 FROM node_certificates WHERE node_id = $1", [agent.nodeId]);
      assert.equal(certs.length, 1, "no second certificate may be recorded without its audit row");
    } finally {
      agent.close();
    }
  } finally {
    await server.stop();
  }
});

serverTest("a retention purge whose audit row cannot be written deletes nothing", async (server, db) => {
  await db.query(
    `INSERT INTO audit_logs (username, action, resource_type, outcome, details, created_at)
       VALUES ('old', 'update', 'policy', 'success', '{}', now() - interval '40 days')`,
  );
  await db.query(`CREATE FUNCTION test_refuse_purge() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.action = 'audit_log.purge' THEN RAISE EXCEPTION 'purge row refused by the test'; END IF;
        RETURN NEW;
      END $$`);
  await db.query(`CREATE TRIGGER test_refuse_purge BEFORE INSERT ON audit_logs
      FOR EACH ROW EXECUTE FUNCTION test_refuse_purge()`);
  await assert.rejects(purgeAuditLogs(db, 30, server.ctx.audit), /purge row refused/);
  const old = await db.query("SELECT 1 FROM audit_logs WHERE username = 'old'");
  assert.equal(old.length, 1, "the old row stays while its purge cannot be recorded");
  await db.query("DROP TRIGGER test_refuse_purge ON audit_logs");
  assert.equal(await purgeAuditLogs(db, 30, server.ctx.audit), 1);
  const rows = await db.query("SELECT details FROM audit_logs WHERE action = 'audit_log.purge'");
  assert.equal(rows.length, 1);
});

dbTest("a unit of work holds no transaction until its first statement", async (db) => {
  // PGlite has one connection: an eagerly begun transaction would stall every other request while a handler
  // still parses or validates.
  const events: string[] = [];
  let release: () => void = () => {};
  const gate = new Promise<void>((resolve) => release = resolve);
  const fallback = setTimeout(() => {
    events.push("fallback");
    release();
  }, 60_000);
  const unit = db.unitOfWork(async () => {
    await gate;
    await db.query("SELECT 1");
    events.push("unit");
  });
  await db.query("SELECT 1");
  events.push("outside");
  release();
  await unit;
  clearTimeout(fallback);
  assert.deepEqual(events, ["outside", "unit"]);
});
