/**
 * The agent's escrow against a real server and real LUKS2 headers on image files: inventory (also without a
 * policy), escrow on the server's task, reveal → rotation → the revealed key no longer opens, and a crash
 * after every step of an escrow and of a rotation: at each interruption every keyslot holds the unlock
 * secret or a key the server holds, and a restarted agent finishes with exactly one escrowed recovery key
 * that opens the volume.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { dbTest } from "../helpers/db.ts";
import type { Db } from "../../server/db/db.ts";
import { bind, createGroup, enrollAgent, releasedPolicy, startAgentServer } from "../helpers/agents.ts";
import { createTestServer } from "../helpers/app.ts";
import { diskEncryptionRoutes } from "../../server/http/routes/disk_encryption.ts";
import { keyringFor } from "../../server/disk_encryption/kek.ts";
import { openRecoveryKey } from "../../server/pki/envelope.ts";
import { RootFs } from "../../agent/fs.ts";
import { agentPolicyClient } from "./helpers.ts";
import { Runner } from "../../agent/runner.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import {
  DiskEncryptionManager,
  ESCROW_STEPS,
  type EscrowStep,
  SimulatedCrash,
} from "../../agent/disk_encryption/manager.ts";
import { readHeader, slotOpenedBy } from "../../agent/disk_encryption/cryptsetup.ts";
import type { PolicyClient } from "../../agent/client.ts";
import type { ServerConfig } from "../../server/config/config.ts";

const haveCryptsetup = await Deno.stat("/usr/sbin/cryptsetup").then(() => true, () => false);
const SKIP = !haveCryptsetup;
if (SKIP) {
  console.warn("disk_encryption_escrow_test skipped: cryptsetup is not installed (.ci/run installs it)");
}

const INITIAL = "initial unlock secret";
const FAST = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
const runner = new Runner();

interface Env {
  db: Db;
  root: string;
  fs: RootFs;
  client: PolicyClient;
  config: ServerConfig;
  reveal(volumeId: string): Promise<string>;
  rotate(volumeId: string): Promise<void>;
  close(): Promise<void>;
}

async function setup(db: Db, policy: Record<string, unknown> | undefined): Promise<Env> {
  const root = await Deno.makeTempDir({ prefix: "svc-de-agent-" });
  const diskEncryption = { kekFile: join(root, "server.kek"), createKekFile: true };
  const server = await startAgentServer(db, { config: { diskEncryption } });
  const rest = await createTestServer({
    db,
    routes: (ctx) => diskEncryptionRoutes(ctx),
    logLevel: "warn",
    config: { diskEncryption },
  });
  const group = await createGroup(db, "laptops");
  if (policy) {
    await bind(
      db,
      await releasedPolicy(db, { name: "fde", type: "DiskEncryption", content: JSON.stringify(policy) }),
      group,
    );
  }
  const agent = await enrollAgent(server, { name: "pc-1", groupId: group });
  const client = agentPolicyClient(server, agent);
  const admin = await rest.loginAs({ superAdmin: true });
  await Deno.mkdir(join(root, "node/images"), { recursive: true });
  await Deno.mkdir(join(root, "node/etc/svc/luks-keys"), { recursive: true, mode: 0o700 });
  return {
    db,
    root,
    fs: await RootFs.open(join(root, "node")),
    client,
    config: server.ctx.config,
    async reveal(volumeId) {
      const res = await admin.request("POST", `/api/v1/disk-encryption/volumes/${volumeId}/reveal`, {
        reason: "test",
        password: admin.password,
      });
      assert.equal(res.status, 200, res.text);
      return res.json.recovery_key;
    },
    async rotate(volumeId) {
      const res = await admin.request("POST", `/api/v1/disk-encryption/volumes/${volumeId}/rotate`, {});
      assert.equal(res.status, 200, res.text);
    },
    async close() {
      client.close();
      agent.close();
      await rest.close();
      await server.stop();
      await Deno.remove(root, { recursive: true });
    },
  };
}

/** A LUKS2 image at node path /images/<name> with the unlock secret in place; returns its UUID. */
async function luksImage(env: Env, name: string): Promise<string> {
  const host = join(env.root, "node/images", name);
  const f = await Deno.open(host, { create: true, write: true });
  await f.truncate(20 * 1024 * 1024);
  f.close();
  const r = await runner.run("cryptsetup", [
    "luksFormat",
    "--type",
    "luks2",
    ...FAST,
    "-q",
    host,
    "--key-file=-",
  ], {
    stdin: INITIAL,
  });
  assert.ok(r.success, r.stderr);
  const uuid = (await runner.run("cryptsetup", ["luksUUID", host])).stdout.trim();
  await Deno.writeTextFile(join(env.root, "node/etc/svc/luks-keys", `${uuid}.key`), INITIAL, { mode: 0o600 });
  return uuid;
}

function manager(env: Env, devices: string[], afterStep?: (step: EscrowStep) => void): DiskEncryptionManager {
  return new DiskEncryptionManager({
    fs: env.fs,
    runner,
    logger: SILENT_LOGGER,
    dataDir: join(env.root, "agent-data"),
    clientId: "",
    devices,
    unlockKeyDir: "/etc/svc/luks-keys",
    pbkdf: FAST,
    afterStep,
  });
}

/** Every key the server holds for a volume, decrypted with the KEK (what a reveal could ever give). */
async function serverKeys(env: Env, uuid: string): Promise<{ id: string; state: string; key: string }[]> {
  const keyring = await keyringFor(env.config);
  const rows = await env.db.query<
    { id: string; state: string; kek_id: string; wrapped_data_key: Uint8Array; ciphertext: Uint8Array }
  >(
    `SELECT k.id, k.state, k.kek_id, k.wrapped_data_key, k.ciphertext FROM luks_recovery_keys k
       JOIN luks_volumes v ON v.id = k.volume_id WHERE v.luks_uuid = $1 ORDER BY k.created_at`,
    [uuid],
  );
  const out = [];
  for (const r of rows) {
    const key = await openRecoveryKey(keyring, r.id, {
      kekId: r.kek_id,
      wrappedDataKey: new Uint8Array(r.wrapped_data_key),
      ciphertext: new Uint8Array(r.ciphertext),
    });
    out.push({ id: r.id, state: r.state, key });
  }
  return out;
}

async function volumeId(env: Env, uuid: string): Promise<string> {
  const [row] = await env.db.query<{ id: string }>("SELECT id FROM luks_volumes WHERE luks_uuid = $1", [
    uuid,
  ]);
  return row.id;
}

/**
 * The invariant: every keyslot is opened by the unlock secret or by a key the server holds; returns the
 * slot of each opener.
 */
async function assertEverySlotKnown(env: Env, name: string, uuid: string): Promise<Map<string, number>> {
  const host = join(env.root, "node/images", name);
  const header = await readHeader(runner, host);
  const openers = new Map<string, number>();
  for (const candidate of [INITIAL, ...(await serverKeys(env, uuid)).map((k) => k.key)]) {
    const slot = await slotOpenedBy(runner, host, candidate);
    if (slot !== undefined) openers.set(candidate, slot);
  }
  const known = new Set(openers.values());
  for (const slot of header.slots) {
    assert.ok(
      known.has(slot),
      `keyslot ${slot} of ${name} holds a key neither the unlock secret nor the server has`,
    );
  }
  assert.equal(openers.get(INITIAL), 0, "the unlock secret still opens slot 0");
  return openers;
}

/** After recovery: exactly the unlock slot and the active key's slot; the active key opens the volume. */
async function assertSettled(env: Env, name: string, uuid: string): Promise<string> {
  const host = join(env.root, "node/images", name);
  const keys = await serverKeys(env, uuid);
  const active = keys.filter((k) => k.state === "active");
  assert.equal(active.length, 1, `one active key for ${name}: ${JSON.stringify(keys.map((k) => k.state))}`);
  const slot = await slotOpenedBy(runner, host, active[0].key);
  assert.notEqual(slot, undefined, "the active escrowed key opens the volume");
  assert.deepEqual((await readHeader(runner, host)).slots, [0, slot]);
  assert.deepEqual(
    JSON.parse(await Deno.readTextFile(join(env.root, "agent-data/disk-encryption/journal.json"))),
    {},
  );
  return active[0].key;
}

dbTest("inventory without a policy: LUKS2 image and an unencrypted one, real luksDump", async (db) => {
  const env = await setup(db, undefined);
  try {
    const uuid = await luksImage(env, "disk.img");
    const plainHost = join(env.root, "node/images/plain.img");
    await Deno.writeFile(plainHost, new Uint8Array(1024 * 1024));
    const m = manager(env, ["/images/disk.img", "/images/plain.img"]);
    await m.connected(env.client);
    const rows = await db.query<Record<string, unknown>>(
      "SELECT luks_uuid, device, luks_version, cipher, key_size_bits, pbkdf, key_slots FROM luks_volumes ORDER BY device",
    );
    assert.deepEqual(rows, [
      {
        luks_uuid: uuid,
        device: "/images/disk.img",
        luks_version: 2,
        cipher: "aes-xts-plain64",
        key_size_bits: 512,
        pbkdf: "pbkdf2",
        key_slots: [{ slot: 0, kind: "passphrase", managed: false }],
      },
      {
        luks_uuid: "",
        device: "/images/plain.img",
        luks_version: 0,
        cipher: "",
        key_size_bits: 0,
        pbkdf: "",
        key_slots: [],
      },
    ]);
    // No policy: no escrow task, nothing written to the header.
    assert.equal((await db.query("SELECT 1 FROM luks_tasks")).length, 0);
    assert.deepEqual((await readHeader(runner, join(env.root, "node/images/disk.img"))).slots, [0]);
    // Unchanged inventory is not sent again; a new keyslot is.
    assert.equal(await m.report(env.client, { onlyIfChanged: true }), false);
    const added = await runner.run(
      "cryptsetup",
      [
        "luksAddKey",
        ...FAST,
        "--key-file",
        join(env.root, `node/etc/svc/luks-keys/${uuid}.key`),
        join(env.root, "node/images/disk.img"),
      ],
      { stdin: "another passphrase" },
    );
    assert.ok(added.success, added.stderr);
    assert.equal(await m.report(env.client, { onlyIfChanged: true }), true);
    const [{ n }] = await db.query<{ n: number }>(
      "SELECT jsonb_array_length(key_slots) AS n FROM luks_volumes WHERE luks_uuid = $1",
      [uuid],
    );
    assert.equal(n, 2);
  } finally {
    await env.close();
  }
}, { ignore: SKIP });

dbTest(
  "escrow on the server's task, reveal, rotation after reveal: the revealed key stops working",
  async (db) => {
    const env = await setup(db, { escrow_recovery_key: true, rotate_after_reveal: true });
    try {
      const uuid = await luksImage(env, "disk.img");
      const host = join(env.root, "node/images/disk.img");
      const m = manager(env, ["/images/disk.img"]);
      await m.connected(env.client);
      const first = await assertSettled(env, "disk.img", uuid);
      const state = await m.state();
      assert.equal(state[uuid].slot, 1);
      const [row] = await db.query<{ agent_key_id: string; key_slots: unknown }>(
        "SELECT agent_key_id, key_slots FROM luks_volumes WHERE luks_uuid = $1",
        [uuid],
      );
      assert.equal(row.agent_key_id, state[uuid].keyId);
      assert.deepEqual(row.key_slots, [
        { slot: 0, kind: "passphrase", managed: false },
        { slot: 1, kind: "recovery", managed: true },
      ]);

      const revealed = await env.reveal(await volumeId(env, uuid));
      assert.equal(revealed, first);
      assert.equal(await slotOpenedBy(runner, host, revealed), 1);

      // The reveal queued a rotation; the agent performs it when told (DISK_ENCRYPTION_TASK → runTasks).
      await m.runTasks(env.client);
      const second = await assertSettled(env, "disk.img", uuid);
      assert.notEqual(second, first);
      assert.equal(await slotOpenedBy(runner, host, revealed), undefined, "the revealed key no longer opens");
      assert.equal(await env.reveal(await volumeId(env, uuid)), second);
      const states = (await serverKeys(env, uuid)).map((k) => k.state);
      assert.deepEqual(states, ["destroyed", "active"]);
    } finally {
      await env.close();
    }
  },
  { ignore: SKIP },
);

dbTest(
  "a crash after any step of an escrow or a rotation never leaves a keyslot the server lacks",
  async (db) => {
    const env = await setup(db, { escrow_recovery_key: true });
    try {
      const steps = ESCROW_STEPS.filter((s) => s !== "confirmed");
      for (const [i, step] of [...steps, "confirmed" as const].entries()) {
        const name = `disk-${i}.img`;
        const uuid = await luksImage(env, name);
        // First escrow, interrupted after `step`.
        const crashing = manager(env, [`/images/${name}`], (s) => {
          if (s === step) throw new SimulatedCrash(s);
        });
        await assert.rejects(crashing.connected(env.client), SimulatedCrash);
        await assertEverySlotKnown(env, name, uuid);
        await manager(env, [`/images/${name}`]).connected(env.client);
        const before = await assertSettled(env, name, uuid);

        // A rotation, interrupted after the same step.
        await env.rotate(await volumeId(env, uuid));
        const crashingRotation = manager(env, [`/images/${name}`], (s) => {
          if (s === step) throw new SimulatedCrash(s);
        });
        await assert.rejects(crashingRotation.runTasks(env.client), SimulatedCrash);
        const openers = await assertEverySlotKnown(env, name, uuid);
        if (step === "generated" || step === "escrowed") {
          assert.ok(openers.has(before), `after ${step} the old key still opens`);
        }
        const restarted = manager(env, [`/images/${name}`]);
        await restarted.connected(env.client);
        const after = await assertSettled(env, name, uuid);
        assert.notEqual(after, before, `rotation interrupted after ${step} completes with a new key`);
        assert.equal(await slotOpenedBy(runner, join(env.root, "node/images", name), before), undefined);
        assert.equal((await db.query("SELECT 1 FROM luks_tasks WHERE state = 'pending'")).length, 0);
      }
    } finally {
      await env.close();
    }
  },
  { ignore: SKIP },
);

dbTest(
  "no usable unlock secret (missing, or readable by others): the task stays pending, no keyslot",
  async (db) => {
    const env = await setup(db, { escrow_recovery_key: true });
    try {
      const uuid = await luksImage(env, "disk.img");
      const secret = join(env.root, "node/etc/svc/luks-keys", `${uuid}.key`);
      // A secret others can read is not used either.
      await Deno.chmod(secret, 0o644);
      await manager(env, ["/images/disk.img"]).connected(env.client);
      assert.deepEqual((await readHeader(runner, join(env.root, "node/images/disk.img"))).slots, [0]);
      await Deno.remove(secret);
      await manager(env, ["/images/disk.img"]).connected(env.client);
      assert.deepEqual((await readHeader(runner, join(env.root, "node/images/disk.img"))).slots, [0]);
      assert.equal((await db.query("SELECT 1 FROM luks_tasks WHERE state = 'pending'")).length, 1);
      assert.equal((await db.query("SELECT 1 FROM luks_recovery_keys")).length, 0);
    } finally {
      await env.close();
    }
  },
  { ignore: SKIP },
);

dbTest(
  "a crash inside luksAddKey (key in a slot, journal still at escrowed) is finished without a second slot",
  async (db) => {
    const env = await setup(db, { escrow_recovery_key: true });
    try {
      const uuid = await luksImage(env, "disk.img");
      const host = join(env.root, "node/images/disk.img");
      const crashing = manager(env, ["/images/disk.img"], (s) => {
        if (s === "escrowed") throw new SimulatedCrash(s);
      });
      await assert.rejects(crashing.connected(env.client), SimulatedCrash);
      // luksAddKey had written the slot when the process died: the journal does not know the slot yet.
      const journal = JSON.parse(
        await Deno.readTextFile(join(env.root, "agent-data/disk-encryption/journal.json")),
      );
      const entry = journal[uuid];
      assert.equal(entry.step, "escrowed");
      const keyFile = join(env.root, "unlock.key");
      await Deno.writeTextFile(keyFile, INITIAL, { mode: 0o600 });
      assert.ok(
        (await runner.run("cryptsetup", ["luksAddKey", ...FAST, "--key-file", keyFile, host], {
          stdin: entry.key,
        }))
          .success,
      );
      await assertEverySlotKnown(env, "disk.img", uuid);
      await manager(env, ["/images/disk.img"]).connected(env.client);
      const key = await assertSettled(env, "disk.img", uuid);
      assert.equal(key, entry.key, "the key already in the header is the one confirmed");
      assert.deepEqual((await readHeader(runner, host)).slots, [0, 1]);
    } finally {
      await env.close();
    }
  },
  { ignore: SKIP },
);
