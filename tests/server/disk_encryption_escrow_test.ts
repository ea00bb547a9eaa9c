/**
 * Disk-encryption escrow end to end on the server, against real LUKS2 headers: an enrolled node reports a
 * volume, gets an escrow task, escrows a key over mTLS, writes it to a real keyslot, confirms; an
 * administrator reveals it over REST (refused and audited without permission, reason or re-authentication),
 * the key opens the volume, a rotation follows, and afterwards the revealed key no longer opens it. The
 * database dump never contains the key; metrics never name nodes.
 */
import assert from "node:assert/strict";
import dgram from "node:dgram";
import { join } from "node:path";
import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { mustRun, runCommand } from "../helpers/command.ts";
import { dbTest, type TestDb } from "../helpers/db.ts";
import type { Db } from "../../server/db/db.ts";
import { bind, createGroup, enrollAgent, releasedPolicy, startAgentServer } from "../helpers/agents.ts";
import { createTestServer } from "../helpers/app.ts";
import { diskEncryptionRoutes } from "../../server/http/routes/disk_encryption.ts";
import { DiskEncryptionTaskKind, LuksKeySlotKind } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateRecoveryKey } from "../../agent/disk_encryption/recovery_key.ts";
import { collectDatabaseFamilies } from "../../server/metrics/collector.ts";
import { metricsRegistry } from "../../server/metrics/counters.ts";
import { createLogger } from "../../server/core/log.ts";
import { addKekToFile } from "../../server/pki/envelope.ts";
import { checkKekAtStart } from "../../server/disk_encryption/kek.ts";
import { sweepDueRotations } from "../../server/disk_encryption/escrow.ts";
import { resolveConfig } from "../../server/config/config.ts";
import { startServer } from "../../server/server.ts";

const CRYPTSETUP = "/usr/sbin/cryptsetup";
const haveCryptsetup = await Deno.stat(CRYPTSETUP).then(() => true, () => false);
const SKIP = haveCryptsetup ? undefined : "cryptsetup is not installed (.ci/run installs it)";
if (SKIP) console.warn(`disk_encryption_escrow_test skipped: ${SKIP}`);

const INITIAL = "initial unlock secret";
const FAST = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];

/** Runs cryptsetup with `stdin` (a passphrase or key) as its input; answers its output, throws when it fails. */
async function mustCryptsetup(args: string[], stdin?: string): Promise<string> {
  return (await mustRun(CRYPTSETUP, args, { stdin })).stdout;
}

async function formatImage(dir: string, name: string): Promise<{ path: string; uuid: string }> {
  const path = join(dir, name);
  const f = await Deno.open(path, { create: true, write: true });
  await f.truncate(20 * 1024 * 1024);
  f.close();
  await mustCryptsetup(["luksFormat", "--type", "luks2", ...FAST, "-q", path, "--key-file=-"], INITIAL);
  return { path, uuid: (await mustCryptsetup(["luksUUID", path])).trim() };
}

async function slots(path: string): Promise<number[]> {
  const meta = JSON.parse(await mustCryptsetup(["luksDump", "--dump-json-metadata", path]));
  return Object.keys(meta.keyslots).map(Number).sort((a, b) => a - b);
}

/** Adds `key` with the initial secret; returns the new slot. */
async function addKey(path: string, key: string, auth = INITIAL): Promise<number> {
  const before = await slots(path);
  const keyFile = `${path}.newkey`;
  await Deno.writeTextFile(keyFile, key, { mode: 0o600 });
  try {
    await mustCryptsetup(["luksAddKey", ...FAST, "-q", path, keyFile, "--key-file=-"], auth);
  } finally {
    await Deno.remove(keyFile);
  }
  return (await slots(path)).find((s) => !before.includes(s))!;
}

async function opens(path: string, key: string): Promise<boolean> {
  return (await runCommand(CRYPTSETUP, ["open", "--test-passphrase", path, "--key-file=-"], { stdin: key }))
    .code === 0;
}

const POLICY = JSON.stringify({
  escrow_recovery_key: true,
  rotate_after_reveal: true,
  require_encryption: true,
});

function udpCollector(): Promise<{ messages: string[]; addr: string; close(): Promise<void> }> {
  const socket = dgram.createSocket("udp4");
  const messages: string[] = [];
  socket.on("message", (buf: Buffer) => messages.push(new TextDecoder().decode(buf)));
  return new Promise((resolve) => {
    socket.bind(0, "127.0.0.1", () => {
      resolve({
        messages,
        addr: `127.0.0.1:${socket.address().port}`,
        close: () => new Promise((r) => socket.close(() => r())),
      });
    });
  });
}

async function eventually<T>(fn: () => Promise<T | undefined> | T | undefined, what: string): Promise<T> {
  const deadline = Date.now() + 60_000;
  while (true) {
    const v = await fn();
    if (v !== undefined && v !== false) return v as T;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function setup(db: Db, dir: string, syslogAddr?: string) {
  const kekFile = join(dir, "kek");
  const diskEncryption = { kekFile, createKekFile: true };
  const server = await startAgentServer(db, { config: { diskEncryption } });
  const rest = await createTestServer({
    db,
    routes: (ctx) => diskEncryptionRoutes(ctx),
    logLevel: "warn",
    config: {
      diskEncryption,
      ...(syslogAddr
        ? {
          audit: {
            syslog: {
              enabled: true,
              network: "udp",
              addr: syslogAddr,
              format: "cef",
              facility: 16,
              tlsCaFile: "",
            },
          },
        }
        : {}),
    },
  });
  const group = await createGroup(db, "laptops");
  await bind(db, await releasedPolicy(db, { name: "fde", type: "DiskEncryption", content: POLICY }), group);
  const agent = await enrollAgent(server, { name: "pc-1", groupId: group });
  return {
    server,
    rest,
    group,
    agent,
    kekFile,
    async close() {
      agent.close();
      await rest.close();
      await server.stop();
    },
  };
}

function volumeReport(uuid: string, path: string, keySlots: number[], escrowedKeyId = "", recovery?: number) {
  return {
    device: path,
    uuid,
    luksVersion: 2,
    cipher: "aes-xts-plain64",
    keySizeBits: 512,
    pbkdf: "pbkdf2",
    keySlots: keySlots.map((slot) => ({
      slot,
      kind: slot === recovery ? LuksKeySlotKind.RECOVERY_KEY : LuksKeySlotKind.PASSPHRASE,
      managed: slot === recovery,
    })),
    escrowedKeyId,
  };
}

/** Every row of every table as text, and for PostgreSQL the pg_dump output too. */
async function dumpDatabase(db: Db, info: TestDb): Promise<string> {
  const tables = await db.query<{ t: string }>(
    `SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) AS t FROM information_schema.tables
      WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`,
  );
  let out = "";
  for (const { t } of tables) {
    const rows = await db.query<{ r: string }>(`SELECT x::text AS r FROM ${t} x`);
    out += rows.map((r) => r.r).join("\n") + "\n";
  }
  if (info.url) {
    const dump = await new Deno.Command("pg_dump", { args: [info.url], stdout: "piped", stderr: "piped" })
      .output();
    assert.equal(dump.code, 0, new TextDecoder().decode(dump.stderr));
    out += new TextDecoder().decode(dump.stdout);
  }
  return out;
}

/** The encodings a key could hide in: as typed, without dashes, hex and base64 of both, and the raw bytes. */
function encodings(key: string): string[] {
  const compact = key.replaceAll("-", "");
  const modhex = "cbdefghijklnrtuv";
  const raw = new Uint8Array(compact.length / 2);
  for (let i = 0; i < raw.length; i++) {
    raw[i] = modhex.indexOf(compact[2 * i]) * 16 + modhex.indexOf(compact[2 * i + 1]);
  }
  const forms = [key, compact, Buffer.from(raw).toString("hex"), Buffer.from(raw).toString("base64")];
  for (const s of [key, compact]) {
    forms.push(Buffer.from(s).toString("hex"), Buffer.from(s).toString("base64"));
  }
  return forms;
}

dbTest("escrow, reveal with all three checks, rotation: real LUKS2 header", async (db, _t, info) => {
  const dir = await Deno.makeTempDir({ prefix: "svc-de-" });
  const syslog = await udpCollector();
  const env = await setup(db, dir, syslog.addr);
  try {
    const { agent, rest } = env;
    const vol = await formatImage(dir, "disk.img");
    // Inventory without a key: the policy asks for escrow, so an escrow task appears.
    await agent.policy.reportDiskEncryptionState({
      clientId: "",
      volumes: [volumeReport(vol.uuid, vol.path, await slots(vol.path))],
      tpm2Available: false,
      externalManager: "",
    });
    const tasks = (await agent.policy.getDiskEncryptionTasks({ clientId: "" })).tasks;
    assert.equal(tasks.length, 1);
    assert.equal(tasks[0].kind, DiskEncryptionTaskKind.ESCROW);
    assert.equal(tasks[0].volumeUuid, vol.uuid);

    // A malformed key is refused without echoing it.
    await assert.rejects(
      agent.policy.escrowRecoveryKey({ clientId: "", volumeUuid: vol.uuid, recoveryKey: "hunter2-secret" }),
      (err: grpc.ServiceError) =>
        err.code === grpc.status.INVALID_ARGUMENT && !err.message.includes("hunter2"),
    );

    const key1 = generateRecoveryKey();
    const { keyId: keyId1 } = await agent.policy.escrowRecoveryKey({
      clientId: "",
      volumeUuid: vol.uuid,
      recoveryKey: key1,
      taskId: tasks[0].id,
      rotationId: "",
    });
    const slot1 = await addKey(vol.path, key1);
    await agent.policy.confirmRecoveryKey({ clientId: "", keyId: keyId1, keySlot: slot1 });
    await agent.policy.reportDiskEncryptionState({
      clientId: "",
      volumes: [volumeReport(vol.uuid, vol.path, await slots(vol.path), keyId1, slot1)],
      tpm2Available: false,
      externalManager: "",
    });
    assert.equal((await agent.policy.getDiskEncryptionTasks({ clientId: "" })).tasks.length, 0);

    const list = await (await rest.loginAs({ permissions: ["disk_encryption:view"] }))
      .request("GET", "/api/v1/disk-encryption/volumes");
    assert.equal(list.status, 200, list.text);
    assert.equal(list.json.total, 1);
    const volume = list.json.items[0];
    assert.equal(volume.escrow_state, "escrowed");
    assert.equal(volume.compliance, "compliant");
    assert.equal(volume.active_key_id, keyId1);
    assert.ok(!list.text.includes(key1));

    const revealPath = `/api/v1/disk-encryption/volumes/${volume.id}/reveal`;
    const auditRows = async () =>
      await db.query<{ action: string; outcome: string; username: string; details: Record<string, unknown> }>(
        `SELECT action, outcome, username, details FROM audit_logs
          WHERE action IN ('disk_encryption.reveal', 'access_denied') ORDER BY id`,
      );

    // 1. Without the permission.
    const viewer = await rest.loginAs({ permissions: ["disk_encryption:view"], username: "viewer" });
    const noPerm = await viewer.request("POST", revealPath, {
      reason: "user locked out",
      password: viewer.password,
    });
    assert.equal(noPerm.status, 403);
    // 2. Without a reason.
    const officer = await rest.loginAs({
      permissions: ["disk_encryption:view", "disk_encryption:reveal"],
      username: "officer",
    });
    const noReason = await officer.request("POST", revealPath, { password: officer.password });
    assert.equal(noReason.status, 400);
    const blankReason = await officer.request("POST", revealPath, {
      reason: "   ",
      password: officer.password,
    });
    assert.equal(blankReason.status, 400);
    // 3. Without re-authentication, and with a wrong password.
    const noAuth = await officer.request("POST", revealPath, { reason: "user locked out" });
    assert.equal(noAuth.status, 403);
    assert.equal(noAuth.json.error.code, "reauthentication_required");
    const wrong = await officer.request("POST", revealPath, {
      reason: "user locked out",
      password: "not-it-at-all",
    });
    assert.equal(wrong.status, 403);
    assert.equal(wrong.json.error.code, "reauthentication_failed");
    for (const r of [noPerm, noReason, blankReason, noAuth, wrong]) assert.ok(!r.text.includes(key1));

    let rows = await auditRows();
    assert.deepEqual(
      rows.map((r) => [r.action, r.outcome, r.username]),
      [
        ["access_denied", "denied", "viewer"],
        ["disk_encryption.reveal", "failure", "officer"],
        ["disk_encryption.reveal", "failure", "officer"],
        // The officer holds the permission: a reveal without (or with a failed) step-up is a failed reveal,
        // with the refusal's code, not an access denial naming a permission the officer has.
        ["disk_encryption.reveal", "failure", "officer"],
        ["disk_encryption.reveal", "failure", "officer"],
      ],
    );
    assert.equal(rows[0].details.required_permission, "disk_encryption:reveal");
    assert.equal(rows[3].details.status, 403);
    assert.equal(rows[3].details.error, "reauthentication_required");
    assert.equal(rows[3].details.required_permission, undefined);
    assert.equal(rows[4].details.error, "reauthentication_failed");
    assert.equal((rows[4].details.body as Record<string, unknown>).password, "[REDACTED]");

    const revealsBefore = await counterValue("svc_luks_recovery_key_reveals_total");
    const ok = await officer.request("POST", revealPath, {
      reason: "user locked out",
      password: officer.password,
    });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.recovery_key, key1);
    assert.equal(ok.json.key_id, keyId1);
    assert.equal(ok.json.rotation_scheduled, true);
    assert.equal(ok.headers.get("cache-control"), "no-store");
    assert.ok(await opens(vol.path, ok.json.recovery_key), "the revealed key opens the volume");
    assert.equal(await counterValue("svc_luks_recovery_key_reveals_total"), revealsBefore + 1);

    rows = await auditRows();
    const success = rows.at(-1)!;
    assert.deepEqual([success.action, success.outcome], ["disk_encryption.reveal", "success"]);
    assert.equal(success.details.reason, "user locked out");
    assert.equal(success.details.key_id, keyId1);
    assert.equal((success.details.body as Record<string, unknown>).password, "[REDACTED]");
    // High severity in syslog (CEF severity 8), the key never.
    const cef = await eventually(
      () =>
        syslog.messages.find((m) => m.includes("disk_encryption.reveal") && m.includes("outcome=success")),
      "the reveal in syslog",
    );
    assert.match(cef, /\|8\|/);
    await eventually(
      () => syslog.messages.filter((m) => m.includes("/reveal")).length >= 6 || undefined,
      "the refusals in syslog",
    );
    assert.ok(!syslog.messages.some((m) => m.includes(key1)));

    // The reveal scheduled a rotation: overdue until done.
    const rotate = (await agent.policy.getDiskEncryptionTasks({ clientId: "" })).tasks;
    assert.equal(rotate.length, 1);
    assert.equal(rotate[0].kind, DiskEncryptionTaskKind.ROTATE);
    assert.equal(rotate[0].reason, "recovery key revealed");
    assert.equal(await gauge(db, "svc_luks_recovery_keys_overdue_total", {}), 1);

    const begun = await agent.policy.beginRecoveryKeyRotation({
      clientId: "",
      volumeUuid: vol.uuid,
      taskId: rotate[0].id,
    });
    assert.equal(begun.currentKeyId, keyId1);
    const key2 = generateRecoveryKey();
    const { keyId: keyId2 } = await agent.policy.escrowRecoveryKey({
      clientId: "",
      volumeUuid: vol.uuid,
      recoveryKey: key2,
      taskId: rotate[0].id,
      rotationId: begun.rotationId,
    });
    const slot2 = await addKey(vol.path, key2);
    await mustCryptsetup(["luksKillSlot", "-q", vol.path, String(slot1), "--key-file=-"], key2);
    await agent.policy.confirmRecoveryKey({ clientId: "", keyId: keyId2, keySlot: slot2 });
    assert.equal(await gauge(db, "svc_luks_recovery_keys_overdue_total", {}), 0);
    assert.equal(await opens(vol.path, key1), false, "the revealed key no longer opens the volume");
    const confirmations = await db.query<{ username: string; details: Record<string, unknown> }>(
      "SELECT username, details FROM audit_logs WHERE action = 'disk_encryption.key_confirmed' ORDER BY id",
    );
    assert.deepEqual(confirmations.map((r) => [r.username, r.details.key_id, r.details.keyslot_destroyed]), [
      ["pc-1", keyId1, undefined],
      ["pc-1", keyId2, true],
    ]);

    const again = await officer.request("POST", revealPath, {
      reason: "second lockout",
      password: officer.password,
    });
    assert.equal(again.status, 200);
    assert.equal(again.json.recovery_key, key2);
    assert.ok(await opens(vol.path, again.json.recovery_key));

    // Nothing in the database opens the volume.
    const dump = await dumpDatabase(db, info);
    assert.ok(dump.length > 1000);
    for (const key of [key1, key2]) {
      for (const form of encodings(key)) assert.ok(!dump.includes(form), `the dump contains a form of a key`);
    }
    // Metrics: right labels, no node names, no key material.
    const families = await collectDatabaseFamilies(db, createLogger("error"));
    const volumes = families.find((f) => f.name === "svc_luks_volumes_total")!;
    assert.deepEqual(
      volumes.samples.map((s) => [s.labels, s.value]),
      [[{ escrowed: "true" }, 1], [{ escrowed: "false" }, 0]],
    );
    const text = (await metricsRegistry.metrics()) + "\n" +
      families.filter((f) => f.name.startsWith("svc_luks")).map((f) => JSON.stringify(f)).join("\n");
    assert.match(text, /svc_luks_escrow_operations_total\{op="escrow",outcome="ok"\} [1-9]/);
    assert.match(text, /svc_luks_escrow_operations_total\{op="destroy",outcome="ok"\} [1-9]/);
    assert.match(text, /svc_luks_escrow_operations_total\{op="release",outcome="ok"\} [1-9]/);
    assert.match(text, /svc_luks_escrow_operations_total\{op="escrow",outcome="error"\} [1-9]/);
    for (const line of text.split("\n").filter((l) => l.includes("svc_luks"))) {
      assert.ok(!line.includes("pc-1") && !line.includes(vol.uuid) && !line.includes(key2), line);
    }
  } finally {
    await env.close();
    await syslog.close();
    await Deno.remove(dir, { recursive: true });
  }
}, { ignore: !!SKIP });

async function counterValue(name: string): Promise<number> {
  const m = new RegExp(`^${name} (\\d+)`, "m").exec(await metricsRegistry.metrics());
  return m ? Number(m[1]) : 0;
}

async function gauge(db: Db, name: string, labels: Record<string, string>): Promise<number> {
  const families = await collectDatabaseFamilies(db, createLogger("error"));
  const sample = families.find((f) => f.name === name)?.samples.find((s) =>
    JSON.stringify(s.labels) === JSON.stringify(labels)
  );
  return sample?.value ?? NaN;
}

dbTest("a node can escrow, confirm and rotate only for its own volumes; clones are flagged", async (db) => {
  const dir = await Deno.makeTempDir({ prefix: "svc-de-" });
  const env = await setup(db, dir);
  try {
    const other = await enrollAgent(env.server, { name: "pc-2", groupId: env.group });
    try {
      const uuid = crypto.randomUUID();
      const report = { clientId: "", tpm2Available: false, externalManager: "" };
      await env.agent.policy.reportDiskEncryptionState({
        ...report,
        volumes: [volumeReport(uuid, "/dev/sda2", [0])],
      });
      const { keyId } = await env.agent.policy.escrowRecoveryKey({
        clientId: "",
        volumeUuid: uuid,
        recoveryKey: generateRecoveryKey(),
        taskId: "",
        rotationId: "",
      });
      const notFound = (err: grpc.ServiceError) => err.code === grpc.status.NOT_FOUND;
      // pc-2 has not reported the volume: escrow, rotation and confirm of pc-1's key are refused.
      await assert.rejects(
        other.policy.escrowRecoveryKey({
          clientId: "",
          volumeUuid: uuid,
          recoveryKey: generateRecoveryKey(),
        }),
        notFound,
      );
      await assert.rejects(
        other.policy.beginRecoveryKeyRotation({ clientId: "", volumeUuid: uuid }),
        notFound,
      );
      await assert.rejects(other.policy.confirmRecoveryKey({ clientId: "", keyId, keySlot: 1 }), notFound);
      // Claiming to be pc-1 is refused by the certificate check.
      await assert.rejects(
        other.policy.confirmRecoveryKey({ clientId: "pc-1", keyId, keySlot: 1 }),
        (err: grpc.ServiceError) => err.code === grpc.status.PERMISSION_DENIED,
      );
      // Even after reporting the same UUID (a cloned image), pc-2 gets its own row, not pc-1's key.
      await other.policy.reportDiskEncryptionState({
        ...report,
        volumes: [volumeReport(uuid, "/dev/sda2", [0])],
      });
      await assert.rejects(other.policy.confirmRecoveryKey({ clientId: "", keyId, keySlot: 1 }), notFound);
      await env.agent.policy.confirmRecoveryKey({ clientId: "", keyId, keySlot: 1 });
      const admin = await env.rest.loginAs({ permissions: ["disk_encryption:view"] });
      const clones = await admin.request("GET", "/api/v1/disk-encryption/volumes?clone=true");
      assert.equal(clones.json.total, 2);
      assert.deepEqual(clones.json.items.map((v: { node_name: string }) => v.node_name).sort(), [
        "pc-1",
        "pc-2",
      ]);
      const pending = await admin.request("GET", "/api/v1/disk-encryption/volumes?escrow=none");
      assert.deepEqual(pending.json.items.map((v: { node_name: string }) => v.node_name), ["pc-2"]);
      const byNode = await admin.request("GET", `/api/v1/disk-encryption/volumes?node=${other.nodeId}`);
      assert.deepEqual(byNode.json.items.map((v: { node_name: string }) => v.node_name), ["pc-2"]);
      const byGroup = await admin.request("GET", `/api/v1/disk-encryption/volumes?group=${env.group}`);
      assert.equal(byGroup.json.total, 2);
      const noGroup = await admin.request(
        "GET",
        `/api/v1/disk-encryption/volumes?group=${crypto.randomUUID()}`,
      );
      assert.equal(noGroup.json.total, 0);
      const bad = await admin.request("GET", "/api/v1/disk-encryption/volumes?escrow=maybe");
      assert.equal(bad.status, 400);
      const nc = await admin.request("GET", "/api/v1/disk-encryption/volumes?compliance=non_compliant");
      assert.deepEqual(nc.json.items[0].issues, ["no recovery key escrowed"]);
      const nodeView = await admin.request("GET", `/api/v1/disk-encryption/nodes/${env.agent.nodeId}`);
      assert.equal(nodeView.status, 200);
      assert.equal(nodeView.json.volumes[0].keys[0].state, "active");
      assert.equal(nodeView.json.policy.name, "fde");
    } finally {
      other.close();
    }
  } finally {
    await env.close();
    await Deno.remove(dir, { recursive: true });
  }
});

dbTest("drift and age schedule rotations", async (db) => {
  const dir = await Deno.makeTempDir({ prefix: "svc-de-" });
  const env = await setup(db, dir);
  try {
    const uuid = crypto.randomUUID();
    const base = { clientId: "", tpm2Available: false, externalManager: "" };
    await env.agent.policy.reportDiskEncryptionState({
      ...base,
      volumes: [volumeReport(uuid, "/dev/vda3", [0])],
    });
    const { keyId } = await env.agent.policy.escrowRecoveryKey({
      clientId: "",
      volumeUuid: uuid,
      recoveryKey: generateRecoveryKey(),
    });
    await env.agent.policy.confirmRecoveryKey({ clientId: "", keyId, keySlot: 1 });
    await env.agent.policy.reportDiskEncryptionState({
      ...base,
      volumes: [volumeReport(uuid, "/dev/vda3", [0, 1], keyId, 1)],
    });
    assert.equal((await env.agent.policy.getDiskEncryptionTasks({ clientId: "" })).tasks.length, 0);
    // Someone removed keyslot 1 by hand: drift.
    await env.agent.policy.reportDiskEncryptionState({
      ...base,
      volumes: [volumeReport(uuid, "/dev/vda3", [0], keyId)],
    });
    const [drift] = (await env.agent.policy.getDiskEncryptionTasks({ clientId: "" })).tasks;
    assert.equal(drift.kind, DiskEncryptionTaskKind.ROTATE);
    assert.match(drift.reason, /drift: keyslot 1/);

    // Age: a 30-day policy and a key confirmed 31 days ago.
    await db.query("UPDATE luks_tasks SET state = 'done'");
    await db.query("UPDATE luks_volumes SET rotation_requested_at = NULL");
    await db.query("UPDATE luks_rotations SET state = 'completed'");
    await db.query(
      `UPDATE policies SET content = $1 WHERE type = 'DiskEncryption'`,
      [JSON.stringify({ escrow_recovery_key: true, recovery_key_rotation_days: 30 })],
    );
    await env.agent.policy.reportDiskEncryptionState({
      ...base,
      volumes: [volumeReport(uuid, "/dev/vda3", [0, 1], keyId, 1)],
    });
    assert.equal((await env.agent.policy.getDiskEncryptionTasks({ clientId: "" })).tasks.length, 0);
    await db.query("UPDATE luks_recovery_keys SET confirmed_at = now() - interval '31 days'");
    // The periodic sweep finds it without a report from the node.
    assert.deepEqual(await sweepDueRotations(db), [env.agent.nodeId]);
    const [age] = (await env.agent.policy.getDiskEncryptionTasks({ clientId: "" })).tasks;
    assert.equal(age.reason, "recovery key older than 30 days");
    assert.deepEqual(await sweepDueRotations(db), [], "a second sweep adds nothing");
  } finally {
    await env.close();
    await Deno.remove(dir, { recursive: true });
  }
});

dbTest(
  "KEK: created 0600 in dev mode, rotation re-wraps, start refused without one when in use",
  async (db) => {
    const dir = await Deno.makeTempDir({ prefix: "svc-de-" });
    const env = await setup(db, dir);
    try {
      const uuid = crypto.randomUUID();
      await env.agent.policy.reportDiskEncryptionState({
        clientId: "",
        volumes: [volumeReport(uuid, "/dev/vda3", [0])],
        tpm2Available: false,
        externalManager: "",
      });
      const key = generateRecoveryKey();
      const { keyId } = await env.agent.policy.escrowRecoveryKey({
        clientId: "",
        volumeUuid: uuid,
        recoveryKey: key,
      });
      await env.agent.policy.confirmRecoveryKey({ clientId: "", keyId, keySlot: 1 });
      assert.equal((await Deno.stat(env.kekFile)).mode! & 0o777, 0o600);
      const [{ kek_id: oldKek }] = await db.query<{ kek_id: string }>(
        "SELECT kek_id FROM luks_recovery_keys",
      );

      const admin = await env.rest.loginAs({ superAdmin: true });
      const [{ id: volumeId }] = await db.query<{ id: string }>("SELECT id FROM luks_volumes");
      const reveal = () =>
        admin.request("POST", `/api/v1/disk-encryption/volumes/${volumeId}/reveal`, {
          reason: "kek test",
          password: admin.password,
        });

      const newKek = await addKekToFile(env.kekFile);
      const rewrap = await admin.request("POST", "/api/v1/disk-encryption/kek/rewrap");
      assert.equal(rewrap.status, 200, rewrap.text);
      assert.deepEqual(rewrap.json, { current_kek_id: newKek, rewrapped: 1, kek_ids_in_use: [newKek] });
      // Drop the old KEK from the file: the key still opens (the server re-reads the file on rewrap).
      const lines = (await Deno.readTextFile(env.kekFile)).split("\n").filter((l) => !l.startsWith(oldKek));
      await Deno.writeTextFile(env.kekFile, lines.join("\n"));
      assert.deepEqual((await admin.request("POST", "/api/v1/disk-encryption/kek/rewrap")).json.rewrapped, 0);
      assert.equal((await reveal()).json.recovery_key, key);

      // A different KEK file cannot open the keys (the database alone is not enough).
      await Deno.writeTextFile(
        env.kekFile,
        `other ${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}\n`,
      );
      const bad = await admin.request("POST", "/api/v1/disk-encryption/kek/rewrap");
      assert.equal(bad.status, 503);
      assert.match(bad.json.error.message, new RegExp(`KEK "${newKek}"`));

      // Start-up: in use without a KEK file → refused; a group-readable KEK file → refused.
      const noKek = resolveConfig({}, {});
      await assert.rejects(checkKekAtStart(noKek, db), /disk encryption is in use/);
      // The server itself refuses to start (before it listens on anything).
      const production = resolveConfig({ "server.data_dir": join(dir, "prod-data") }, {});
      await assert.rejects(
        startServer(production, { db, log: createLogger("error") }),
        /disk encryption is in use .* disk_encryption\.kek_file is not set/,
      );
      await Deno.chmod(env.kekFile, 0o640);
      const loose = resolveConfig({ "disk_encryption.kek_file": env.kekFile }, {});
      await assert.rejects(checkKekAtStart(loose, db), /chmod 600/);
      await db.query("DELETE FROM luks_recovery_keys");
      // No key yet, but a released policy asks for escrow: in use too.
      await assert.rejects(checkKekAtStart(noKek, db), /disk encryption is in use/);
      await db.query(
        "UPDATE policies SET content = '{\"require_encryption\":true}' WHERE type = 'DiskEncryption'",
      );
      await checkKekAtStart(noKek, db);
    } finally {
      await env.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
);

dbTest(
  "a reveal during an interrupted rotation also gives the unconfirmed key that opens the volume",
  async (db) => {
    const dir = await Deno.makeTempDir({ prefix: "svc-de-" });
    const env = await setup(db, dir);
    try {
      const { agent, rest } = env;
      const vol = await formatImage(dir, "disk.img");
      const report = (escrowed: string, recovery: number | undefined) =>
        slots(vol.path).then((s) =>
          agent.policy.reportDiskEncryptionState({
            volumes: [volumeReport(vol.uuid, vol.path, s, escrowed, recovery)],
          })
        );
      await report("", undefined);
      const key1 = generateRecoveryKey();
      const { keyId: keyId1 } = await agent.policy.escrowRecoveryKey({
        volumeUuid: vol.uuid,
        recoveryKey: key1,
      });
      const slot1 = await addKey(vol.path, key1);
      await agent.policy.confirmRecoveryKey({ keyId: keyId1, keySlot: slot1 });
      await report(keyId1, slot1);
      // The node rotates and dies after destroying the old keyslot, before confirming the new key.
      const begun = await agent.policy.beginRecoveryKeyRotation({ volumeUuid: vol.uuid });
      const key2 = generateRecoveryKey();
      const { keyId: keyId2 } = await agent.policy.escrowRecoveryKey({
        volumeUuid: vol.uuid,
        recoveryKey: key2,
        rotationId: begun.rotationId,
      });
      const slot2 = await addKey(vol.path, key2);
      await mustCryptsetup(["luksKillSlot", "-q", vol.path, String(slot1), "--key-file=-"], key2);

      const officer = await rest.loginAs({ permissions: ["disk_encryption:view", "disk_encryption:reveal"] });
      const [{ id }] = await db.query<{ id: string }>("SELECT id FROM luks_volumes");
      const res = await officer.request("POST", `/api/v1/disk-encryption/volumes/${id}/reveal`, {
        reason: "machine stuck at boot",
        password: officer.password,
      });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.recovery_key, key1);
      assert.equal(await opens(vol.path, key1), false);
      assert.deepEqual(res.json.alternate_keys, [{ key_id: keyId2, recovery_key: key2 }]);
      assert.ok(await opens(vol.path, key2), "the alternate key opens the volume");

      // The node comes back and confirms the key that was revealed: it is rotated in turn.
      await agent.policy.confirmRecoveryKey({ keyId: keyId2, keySlot: slot2 });
      const tasks = (await agent.policy.getDiskEncryptionTasks({})).tasks;
      assert.deepEqual(tasks.map((t) => [t.kind, t.reason]), [
        [DiskEncryptionTaskKind.ROTATE, "recovery key revealed before its confirmation"],
      ]);
    } finally {
      await env.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
  { ignore: !!SKIP },
);
