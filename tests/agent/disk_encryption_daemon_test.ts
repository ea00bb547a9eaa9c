/**
 * The agent daemon with disk encryption, in process against a real server: at connect it reports its LUKS2
 * image and performs the escrow task; an administrator's reveal makes the server send DISK_ENCRYPTION_TASK
 * on the policy stream, and the daemon rotates the key without being asked otherwise, so the revealed key
 * stops opening the volume.
 */
import { enrolledDataDir, luksNode } from "./helpers.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { dbTest } from "../helpers/db.ts";
import { bind, createGroup, enrollAgent, releasedPolicy, startAgentServer } from "../helpers/agents.ts";
import { createTestServer } from "../helpers/app.ts";
import { diskEncryptionRoutes } from "../../server/http/routes/disk_encryption.ts";
import { buildAgentConfig } from "../../agent/config.ts";
import { runDaemon } from "../../agent/daemon.ts";
import { Runner } from "../../agent/runner.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { slotOpenedBy } from "../../agent/disk_encryption/cryptsetup.ts";

const haveCryptsetup = await Deno.stat("/usr/sbin/cryptsetup").then(() => true, () => false);
if (!haveCryptsetup) console.warn("disk_encryption_daemon_test skipped: cryptsetup is not installed");

const INITIAL = "initial unlock secret";
const runner = new Runner();

async function until<T>(what: string, fn: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    const v = await fn();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

dbTest("daemon: escrow at connect, rotation on the DISK_ENCRYPTION_TASK a reveal sends", async (db) => {
  const base = await Deno.makeTempDir({ prefix: "svc-de-daemon-" });
  const diskEncryption = { kekFile: join(base, "server.kek"), createKekFile: true };
  const server = await startAgentServer(db, { config: { diskEncryption } });
  const rest = await createTestServer({
    db,
    routes: (ctx) => diskEncryptionRoutes(ctx),
    logLevel: "warn",
    config: { diskEncryption },
  });
  const abort = new AbortController();
  let daemon: Promise<void> | undefined;
  try {
    const group = await createGroup(db, "laptops");
    const content = JSON.stringify({ escrow_recovery_key: true, rotate_after_reveal: true });
    await bind(db, await releasedPolicy(db, { name: "fde", type: "DiskEncryption", content }), group);
    const agent = await enrollAgent(server, { name: "pc-1", groupId: group });
    agent.close();

    const { root, image, uuid } = await luksNode(runner, base, INITIAL);

    const dataDir = await enrolledDataDir(base, agent, server);
    const { config } = buildAgentConfig({
      server: { address: "localhost", policy_port: server.policyPort },
      agent: { client_id: "pc-1", root_dir: root },
      enrollment: { data_dir: dataDir },
      disk_encryption: { devices: "/images/disk.img", unlock_key_dir: "/etc/svc/luks-keys" },
    }, "test");
    daemon = runDaemon({ config, logger: SILENT_LOGGER, signal: abort.signal, enforcers: [] });

    const activeKey = async () =>
      (await db.query<{ id: string }>(
        `SELECT k.id FROM luks_recovery_keys k JOIN luks_volumes v ON v.id = k.volume_id
          WHERE v.luks_uuid = $1 AND k.state = 'active'`,
        [uuid],
      ))[0]?.id;
    const first = await until("the escrow at connect", activeKey);
    const [{ id: volumeId }] = await db.query<{ id: string }>(
      "SELECT id FROM luks_volumes WHERE luks_uuid = $1",
      [
        uuid,
      ],
    );
    const admin = await rest.loginAs({ superAdmin: true });
    const res = await admin.request("POST", `/api/v1/disk-encryption/volumes/${volumeId}/reveal`, {
      reason: "locked out",
      password: admin.password,
    });
    assert.equal(res.status, 200, res.text);
    const revealed: string = res.json.recovery_key;
    assert.notEqual(await slotOpenedBy(runner, image, revealed), undefined);

    const second = await until("the rotation the reveal triggered", async () => {
      const id = await activeKey();
      return id && id !== first ? id : undefined;
    });
    assert.notEqual(second, first);
    assert.equal(await slotOpenedBy(runner, image, revealed), undefined, "the revealed key no longer opens");
  } finally {
    abort.abort();
    await daemon?.catch(() => {});
    await rest.close();
    await server.stop();
    await Deno.remove(base, { recursive: true });
  }
}, { ignore: !haveCryptsetup });
