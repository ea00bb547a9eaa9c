/**
 * Several DiskEncryption policies on one node: the server merges them as the agent does, field by field, so a
 * protector asked for by a policy below the top one still gets its task, escrow is asked for by any policy, and
 * the inventory shows every policy's missed requirements. (The server once read the top policy alone: a lower
 * policy asking for TPM2 stayed NON_COMPLIANT on the node with no task ever sent.)
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import type { Db } from "../../server/db/db.ts";
import { bind, createGroup, releasedPolicy } from "../helpers/agents.ts";
import { moveNodeToGroup } from "../../server/domain/nodes_bulk.ts";
import { storeReport, type VolumeReport } from "../../server/disk_encryption/escrow.ts";
import { nodeView } from "../../server/disk_encryption/inventory.ts";
import { mergeDiskEncryption } from "../../shared/policy_types/disk_encryption.ts";
import { diskEncryptionType } from "../../shared/policy_types/disk_encryption.ts";

const volume: VolumeReport = {
  device: "/dev/vda3",
  uuid: "0b9d2f43-6a51-4c1e-9a43-3f1e7c2b5d10",
  mapperName: "luks-0b9d",
  mountPoint: "/",
  root: true,
  luksVersion: 1,
  cipher: "aes-cbc-essiv:sha256",
  keySizeBits: 256,
  pbkdf: "pbkdf2",
  keySlots: [{ slot: 0, kind: "passphrase", managed: false }],
  tpm2Enrolled: false,
  tpm2Pcrs: [],
  tangEnrolled: false,
  escrowedKeyId: "",
};

async function nodeIn(db: Db, group: string): Promise<string> {
  const [node] = await db.query<{ id: string }>("INSERT INTO nodes (name) VALUES ('laptop-7') RETURNING id");
  await db.transaction((tx) => moveNodeToGroup(tx, node.id, group));
  return node.id;
}

async function policy(db: Db, group: string, name: string, priority: number, content: object): Promise<void> {
  const id = await releasedPolicy(db, { name, type: "DiskEncryption", content: JSON.stringify(content) });
  await bind(db, id, group, { priority });
}

async function taskKinds(db: Db, nodeId: string): Promise<string[]> {
  const rows = await db.query<{ kind: string }>(
    "SELECT kind FROM luks_tasks WHERE node_id = $1 AND state = 'pending' ORDER BY kind",
    [nodeId],
  );
  return rows.map((r) => r.kind);
}

dbTest(
  "disk encryption: a lower policy's TPM2 protector and escrow get their tasks; every policy's requirements count",
  async (db) => {
    const group = await createGroup(db, "laptops");
    const nodeId = await nodeIn(db, group);
    // The top policy only sets requirements; the lower ones ask for TPM2 and for escrow.
    await policy(db, group, "baseline", 100, { require_encryption: true, min_luks_version: 2 });
    await policy(db, group, "tpm", 50, { tpm2: { enroll: true, pcrs: [7] } });
    await policy(db, group, "escrow", 10, {
      escrow_recovery_key: true,
      allowed_ciphers: ["aes-xts-plain64"],
    });

    await db.transaction((tx) =>
      storeReport(tx, { nodeId, nodeName: "laptop-7" }, {
        volumes: [volume],
        tpm2Available: true,
        externalManager: "",
      })
    );
    assert.deepEqual(await taskKinds(db, nodeId), ["enroll_tpm2", "escrow"]);

    const view = await nodeView(db, nodeId);
    const issues = view.volumes.flatMap((v) => v.issues);
    assert.ok(issues.includes("LUKS1 header; the policy requires LUKS2"), issues.join("; "));
    assert.ok(
      issues.some((i) => i.startsWith("cipher aes-cbc-essiv:sha256 is not one of")),
      issues.join("; "),
    );
    assert.ok(issues.includes("TPM2 protector missing"), issues.join("; "));
    assert.ok(issues.includes("no recovery key escrowed"), issues.join("; "));
  },
);

Deno.test("disk encryption merge: each protector from the first policy asking for it, escrow from any", () => {
  const parse = (content: object) => diskEncryptionType.parse(JSON.stringify(content));
  const merged = mergeDiskEncryption([
    parse({ require_encryption: true }),
    parse({ escrow_recovery_key: true, tpm2: { enroll: true, pcrs: [7, 14] } }),
    parse({ escrow_recovery_key: true, recovery_key_rotation_days: 90, tpm2: { enroll: true, pcrs: [1] } }),
    parse({
      escrow_recovery_key: true,
      recovery_key_rotation_days: 30,
      rotate_after_reveal: true,
      tang: { servers: [{ url: "http://tang.example", thumbprint: "x2rUQ3eRyH3LxmC0aCRm9Ucmn7Q" }] },
    }),
  ]);
  assert.deepEqual(merged.tpm2?.pcrs, [7, 14]);
  assert.equal(merged.tang?.servers[0].url, "http://tang.example");
  assert.equal(merged.escrowRecoveryKey, true);
  assert.equal(merged.recoveryKeyRotationDays, 90);
  assert.equal(merged.rotateAfterReveal, true);
  assert.equal(merged.requirements.length, 4);
  const none = mergeDiskEncryption([parse({ require_encryption: true })]);
  assert.equal(none.escrowRecoveryKey, false);
  assert.equal(none.tpm2, undefined);
  assert.equal(none.tang, undefined);
});
