// The unary PolicyService methods over the real policy port with a real agent certificate: compliance
// reports (latest per node and policy, refused for policies the node does not receive), heartbeats, tamper
// events in the audit log, catalogues per node, agent configuration from settings, the disk-encryption
// placeholders, and both ports surviving clients that hang up after a burst of calls.

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { dbTest, freshDb } from "../helpers/db.ts";
import {
  type Agent,
  bind,
  createGroup,
  rejectsWithGrpc,
  releasedPolicy,
  withEnrolledAgent,
} from "../helpers/agents.ts";
import { DEFAULT_AGENT_NOTIFICATIONS } from "../../server/domain/agent_settings.ts";
import { ComplianceStatus } from "../../shared/gen/svc/policy/v1/policy_pb.ts";

dbTest(
  "ReportCompliance keeps the latest result per policy and refuses policies the node does not receive",
  async (db) => {
    await withEnrolledAgent(db, async (_server, agent, group) => {
      const delivered = await releasedPolicy(db, { name: "delivered" });
      await bind(db, delivered, group);
      const elsewhere = await releasedPolicy(db, { name: "elsewhere" });
      await bind(db, elsewhere, await createGroup(db, "other"));
      const disabled = await releasedPolicy(db, { name: "disabled" });
      await bind(db, disabled, group, { enabled: false });

      await agent.policy.reportCompliance({
        clientId: "pc-1",
        policyId: delivered,
        status: ComplianceStatus.NON_COMPLIANT,
        message: "1 of 2 settings differ",
        policyVersion: 1,
        items: [
          {
            schemaId: "org.gnome.desktop.screensaver",
            key: "lock-enabled",
            status: ComplianceStatus.COMPLIANT,
          },
          {
            schemaId: "org.gnome.desktop.session",
            key: "idle-delay",
            status: ComplianceStatus.NON_COMPLIANT,
            message: "expected 300, got 900",
          },
        ],
      });
      await agent.policy.reportCompliance({
        clientId: "pc-1",
        policyId: delivered,
        status: ComplianceStatus.COMPLIANT,
        policyVersion: 1,
        items: [{ schemaId: "rule", key: "r1", status: ComplianceStatus.COMPLIANT }],
      });
      const rows = await db.query<
        { status: string; message: string; items: unknown; policy_version: number }
      >(
        "SELECT status, message, items, policy_version FROM compliance_results WHERE node_id = $1",
        [agent.nodeId],
      );
      assert.deepEqual(rows, [{
        status: "compliant",
        message: "",
        items: [{ schema_id: "rule", key: "r1", status: "compliant", message: "" }],
        policy_version: 1,
      }]);

      for (const policyId of [elsewhere, disabled, crypto.randomUUID()]) {
        await rejectsWithGrpc(
          agent.policy.reportCompliance({ clientId: "pc-1", policyId, status: ComplianceStatus.COMPLIANT }),
          grpc.status.FAILED_PRECONDITION,
          /is not delivered to node "pc-1"/,
        );
      }
      await rejectsWithGrpc(
        agent.policy.reportCompliance({
          clientId: "pc-1",
          policyId: "not-a-uuid",
          status: ComplianceStatus.COMPLIANT,
        }),
        grpc.status.INVALID_ARGUMENT,
        /^policy_id: /,
      );
      await rejectsWithGrpc(
        agent.policy.reportCompliance({
          clientId: "pc-1",
          policyId: delivered,
          status: 42 as ComplianceStatus,
        }),
        grpc.status.INVALID_ARGUMENT,
        /^status: /,
      );
      await rejectsWithGrpc(
        agent.policy.reportCompliance({
          clientId: "pc-1",
          policyId: delivered,
          status: ComplianceStatus.COMPLIANT,
          items: [{ schemaId: "s", key: "k\u0000", status: ComplianceStatus.COMPLIANT }],
        }),
        grpc.status.INVALID_ARGUMENT,
        /^items\[0\]\.key: contains control characters/,
      );
      const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM compliance_results");
      assert.equal(n, 1);
    });
  },
);

dbTest(
  "Heartbeat stores host facts and last_seen; facts the agent could not read keep their value",
  async (db) => {
    await withEnrolledAgent(db, async (_server, agent) => {
      const before = new Date();
      await agent.policy.heartbeat({
        clientId: "pc-1",
        fqdn: "pc-1.example.org",
        ipAddress: "192.0.2.10",
        osName: "Fedora Linux",
        osVersion: "41",
        desktopEnvironments: ["GNOME 47", "KDE Plasma 6.2.4"],
        agentVersion: "1.2.3",
        machineId: "0123456789abcdef0123456789abcdef",
        healthy: true,
      });
      const read = async () =>
        (await db.query<Record<string, unknown>>(
          `SELECT fqdn, ip_address, os_name, os_version, desktop_environments, agent_version, machine_id, last_seen
         FROM nodes WHERE id = $1`,
          [agent.nodeId],
        ))[0];
      const row = await read();
      assert.ok((row.last_seen as Date).getTime() >= before.getTime() - 1000);
      delete row.last_seen;
      assert.deepEqual(row, {
        fqdn: "pc-1.example.org",
        ip_address: "192.0.2.10",
        os_name: "Fedora Linux",
        os_version: "41",
        desktop_environments: ["GNOME 47", "KDE Plasma 6.2.4"],
        agent_version: "1.2.3",
        machine_id: "0123456789abcdef0123456789abcdef",
      });

      await agent.policy.heartbeat({ clientId: "pc-1", agentVersion: "1.2.4" });
      const next = await read();
      assert.equal(next.agent_version, "1.2.4");
      assert.equal(next.os_name, "Fedora Linux");
      assert.deepEqual(next.desktop_environments, []);

      await rejectsWithGrpc(
        agent.policy.heartbeat({ clientId: "pc-1", osName: "Fedora\n<script>" }),
        grpc.status.INVALID_ARGUMENT,
        /^os_name: contains control characters/,
      );
      await rejectsWithGrpc(
        agent.policy.heartbeat({ clientId: "pc-1", fqdn: "a".repeat(300) }),
        grpc.status.INVALID_ARGUMENT,
        /^fqdn: is longer than 253/,
      );
    });
  },
);

dbTest("ReportTamperEvent is audited as tamper_detected with the path and the processes", async (db) => {
  await withEnrolledAgent(db, async (_server, agent) => {
    const detected = new Date("2025-03-01T10:00:00Z");
    await agent.policy.reportTamperEvent({
      clientId: "pc-1",
      filePath: "/etc/polkit-1/rules.d/50-svc-policy.rules",
      processes: [{ pid: 4242, comm: "vim", user: "alice" }],
      detectedAt: timestampFromDate(detected),
      policyType: "Polkit",
    });
    const rows = await db.query<Record<string, unknown>>(
      `SELECT action, outcome, username, node_id, resource_type, resource_id, source_ip, details FROM audit_logs
       WHERE action = 'tamper_detected'`,
    );
    assert.deepEqual(rows, [{
      action: "tamper_detected",
      outcome: "success",
      username: "pc-1",
      node_id: agent.nodeId,
      resource_type: "managed_file",
      resource_id: "/etc/polkit-1/rules.d/50-svc-policy.rules",
      source_ip: "127.0.0.1",
      details: {
        processes: [{ pid: 4242, comm: "vim", user: "alice" }],
        policy_type: "Polkit",
        detected_at: detected.toISOString(),
      },
    }]);
    await rejectsWithGrpc(
      agent.policy.reportTamperEvent({ clientId: "pc-1", filePath: "relative/path" }),
      grpc.status.INVALID_ARGUMENT,
      /^file_path: must be an absolute path/,
    );
  });
});

dbTest(
  "catalogues are stored per node, replaced by each report, and never rewrite built-in entries",
  async (db) => {
    await withEnrolledAgent(db, async (_server, agent) => {
      await db.query(
        "INSERT INTO dconf_schemas (schema_id, path, source) VALUES ('org.gnome.builtin', '/org/gnome/builtin/', 'builtin')",
      );
      await agent.policy.reportSchemaCatalogue({
        clientId: "pc-1",
        gnomeVersion: "47.2",
        schemas: [
          {
            schemaId: "org.gnome.desktop.screensaver",
            path: "/org/gnome/desktop/screensaver/",
            keys: [{ name: "lock-enabled", type: "b", summary: "Lock on idle", defaultValue: "true" }],
          },
          { schemaId: "org.gnome.builtin", path: "/hijacked/" },
        ],
      });
      const keys = await db.query<{ keys: { name: string; type: string; default_value: string }[] }>(
        "SELECT keys FROM dconf_schemas WHERE schema_id = 'org.gnome.desktop.screensaver'",
      );
      assert.equal(keys[0].keys[0].name, "lock-enabled");
      assert.equal(keys[0].keys[0].default_value, "true");
      const builtin = await db.query<{ path: string; source: string }>(
        "SELECT path, source FROM dconf_schemas WHERE schema_id = 'org.gnome.builtin'",
      );
      assert.deepEqual(builtin, [{ path: "/org/gnome/builtin/", source: "builtin" }]);
      const mine = async () =>
        (await db.query<{ schema_id: string }>(
          "SELECT schema_id FROM node_dconf_schemas WHERE node_id = $1 ORDER BY schema_id",
          [agent.nodeId],
        )).map((r) => r.schema_id);
      assert.deepEqual(await mine(), ["org.gnome.builtin", "org.gnome.desktop.screensaver"]);
      const [{ gnome_version }] = await db.query<{ gnome_version: string }>(
        "SELECT gnome_version FROM nodes WHERE id = $1",
        [agent.nodeId],
      );
      assert.equal(gnome_version, "47.2");

      await agent.policy.reportSchemaCatalogue({
        clientId: "pc-1",
        schemas: [{ schemaId: "org.gnome.builtin" }],
      });
      assert.deepEqual(await mine(), ["org.gnome.builtin"]);

      // One bad entry refuses the whole report, naming it; nothing of it is written.
      await rejectsWithGrpc(
        agent.policy.reportSchemaCatalogue({
          clientId: "pc-1",
          schemas: [{ schemaId: "org.ok" }, { schemaId: "../etc" }],
        }),
        grpc.status.INVALID_ARGUMENT,
        /^schemas\[1\]\.schema_id: /,
      );
      assert.deepEqual(await mine(), ["org.gnome.builtin"]);
      assert.equal((await db.query("SELECT 1 FROM dconf_schemas WHERE schema_id = 'org.ok'")).length, 0);

      await agent.policy.reportPolkitCatalogue({
        clientId: "pc-1",
        actions: [{
          actionId: "org.freedesktop.udisks2.filesystem-mount",
          description: "Mount a filesystem",
          message: "Authentication is required to mount the filesystem",
          vendor: "The Udisks Project",
          defaultAny: "auth_admin",
          defaultInactive: "auth_admin",
          defaultActive: "yes",
        }],
      });
      const actions = await db.query<Record<string, string>>(
        `SELECT a.action_id, a.default_active, a.source FROM polkit_actions a
       JOIN node_polkit_actions n ON n.action_id = a.action_id WHERE n.node_id = $1`,
        [agent.nodeId],
      );
      assert.deepEqual(actions, [{
        action_id: "org.freedesktop.udisks2.filesystem-mount",
        default_active: "yes",
        source: "agent",
      }]);
      await rejectsWithGrpc(
        agent.policy.reportPolkitCatalogue({
          clientId: "pc-1",
          actions: [{ actionId: "org.example.x", defaultAny: "sudo" }],
        }),
        grpc.status.INVALID_ARGUMENT,
        /^actions\[0\]\.default_any: /,
      );
    });
  },
);

dbTest(
  "GetAgentConfig returns notification settings, with defaults for what is not configured",
  async (db) => {
    await withEnrolledAgent(db, async (server, agent) => {
      const defaults = (await agent.policy.getAgentConfig({ clientId: "pc-1" })).config!.notifications!;
      assert.equal(defaults.enabled, true);
      assert.equal(defaults.cooldownSeconds, 300);
      assert.equal(defaults.defaultMessage, DEFAULT_AGENT_NOTIFICATIONS.message);
      assert.equal(
        defaults.messageByPolicyType.Firefox,
        DEFAULT_AGENT_NOTIFICATIONS.messages_by_type.Firefox,
      );

      await db.query("INSERT INTO settings (key, value) VALUES ('agent.notifications', $1::text::jsonb)", [
        JSON.stringify({
          enabled: false,
          cooldown_seconds: 60,
          message: "Please restart.",
          messages_by_type: { Firefox: "Restart Firefox now.", Chrome: "", Polkit: "Log in again." },
        }),
      ]);
      const set = (await agent.policy.getAgentConfig({ clientId: "pc-1" })).config!.notifications!;
      assert.equal(set.enabled, false);
      assert.equal(set.cooldownSeconds, 60);
      assert.equal(set.defaultMessage, "Please restart.");
      assert.equal(set.messageByPolicyType.Firefox, "Restart Firefox now.");
      assert.equal(set.messageByPolicyType.Polkit, "Log in again.");
      assert.equal(
        set.messageByPolicyType.Chrome,
        undefined,
        "an empty message falls back to the general one",
      );
      assert.equal(
        set.messageByPolicyType.Edge,
        undefined,
        "saved settings are used exactly: Edge uses the default",
      );

      await db.query(
        `UPDATE settings SET value = '{"enabled": "yes", "cooldown_seconds": -5}'::jsonb WHERE key = 'agent.notifications'`,
      );
      const bad = (await agent.policy.getAgentConfig({ clientId: "pc-1" })).config!.notifications!;
      assert.equal(bad.enabled, true);
      assert.equal(bad.cooldownSeconds, 300);
      assert.ok(server.test.logs.some((l) => l.includes("agent.notifications") && l.includes("enabled")));
    });
  },
);

dbTest(
  "disk-encryption methods run behind the certificate check (behaviour: disk_encryption_*_test.ts)",
  async (db) => {
    await withEnrolledAgent(db, async (_server, agent) => {
      await agent.policy.reportDiskEncryptionState({ clientId: "pc-1" });
      assert.deepEqual((await agent.policy.getDiskEncryptionTasks({ clientId: "pc-1" })).tasks, []);
      const calls: (() => Promise<unknown>)[] = [
        () => agent.policy.reportDiskEncryptionState({ clientId: "pc-2" }),
        () => agent.policy.getDiskEncryptionTasks({ clientId: "pc-2" }),
        () => agent.policy.escrowRecoveryKey({ clientId: "pc-2" }),
        () => agent.policy.confirmRecoveryKey({ clientId: "pc-2" }),
        () => agent.policy.beginRecoveryKeyRotation({ clientId: "pc-2" }),
      ];
      for (const call of calls) {
        await rejectsWithGrpc(
          call(),
          grpc.status.PERMISSION_DENIED,
          /does not match the node of the client certificate/,
        );
      }
    });
  },
);

/**
 * Client processes that make a burst of calls, then close their channel (GOAWAY). Deno's HTTP/2 server used to
 * abort the whole process on this (see server/grpc/http2_sessions.ts); it only shows with the client in
 * another process, and not on every run (without the workaround, about one run in three of this test aborts).
 */
async function burstThenClose(
  target: string,
  options: { method: string; caPem: string; cert?: Agent },
): Promise<void> {
  const script = `
    import * as grpc from "@grpc/grpc-js";
    import { Buffer } from "node:buffer";
    const o = ${
    JSON.stringify({
      target,
      method: options.method,
      ca: options.caPem,
      cert: options.cert?.certPem,
      key: options.cert?.keyPem,
    })
  };
    const credentials = o.cert
      ? grpc.credentials.createSsl(Buffer.from(o.ca), Buffer.from(o.key), Buffer.from(o.cert))
      : grpc.credentials.createSsl(Buffer.from(o.ca));
    const client = new grpc.Client(o.target, credentials);
    let n = 0;
    const id = (b) => b;
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (n++ < 500) await new Promise((resolve) => client.makeUnaryRequest(o.method, id, id, Buffer.alloc(300), () => resolve()));
    }));
    client.close();
    await new Promise((r) => setTimeout(r, 100));
  `;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "-"],
    cwd: new URL("../../", import.meta.url).pathname,
    stdin: "piped",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(script));
  await writer.close();
  const { code, stderr } = await child.output();
  assert.equal(code, 0, new TextDecoder().decode(stderr));
}

// The database plays no part here, so one driver is enough.
Deno.test({
  name: "both ports survive clients that close their connection right after a burst of calls",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const { db, dispose } = await freshDb("pglite");
    try {
      await withEnrolledAgent(db, async (server, agent) => {
        const caPem = server.ctx.ca.certPem;
        const web = `localhost:${server.webPort}`;
        const policy = `localhost:${server.policyPort}`;
        const kerberos = "/svc.enrollment.v1.EnrollmentService/KerberosEnroll";
        const config = "/svc.policy.v1.PolicyService/GetAgentConfig";
        for (let round = 0; round < 4; round++) {
          await Promise.all([
            burstThenClose(web, { method: kerberos, caPem }),
            burstThenClose(web, { method: kerberos, caPem }),
            burstThenClose(policy, { method: config, caPem, cert: agent }),
            burstThenClose(policy, { method: config, caPem, cert: agent }),
          ]);
        }
        // Still serving (had the process aborted, this test run would have died with it).
        await agent.policy.heartbeat({ clientId: "pc-1" });
      });
    } finally {
      await dispose();
    }
  },
});
