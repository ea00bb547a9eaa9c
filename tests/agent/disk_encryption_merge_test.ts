/**
 * DiskEncryption over the desktop skeleton, what is its own: the priority merge of the protectors (one winner
 * per protector, shared by the enforcer's report and the manager's protector tasks), the agent's check of what
 * reaches a tool, and the size of the modules of agent/disk_encryption/. The skeleton's shared steps (re-validation,
 * cryptsetup missing, nothing to do, watches) are proven in tests/agent/desktop_skeleton_test.ts.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import { diskEncryptionEnforcer } from "../../agent/disk_encryption/enforcer.ts";
import { checkDiskEncryption, protectorsInForce } from "../../agent/disk_encryption/merge.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { Runner } from "../../agent/runner.ts";
import type { CachedPolicy, EnforcerIO } from "../../agent/sync/types.ts";
import { nodeTest, tempNode } from "./helpers.ts";

const haveCryptsetup = await Deno.stat("/usr/sbin/cryptsetup").then(() => true, () => false);
const THP_A = "thumbprint-of-server-a";
const THP_B = "thumbprint-of-server-b";

function policy(id: string, priority: number, content: Record<string, unknown>, type = "DiskEncryption") {
  return {
    id,
    name: id,
    type,
    version: 1,
    priority,
    content: JSON.stringify(content),
  } satisfies CachedPolicy;
}

Deno.test("the agent's check refuses what would reach a tool and keeps cipher names a LUKS1 header shows", () => {
  const ok = checkDiskEncryption(policy("p", 0, { allowed_ciphers: ["aes-cbc-essiv:sha256"] }));
  assert.deepEqual(ok.allowedCiphers, ["aes-cbc-essiv:sha256"]);
  assert.throws(
    () =>
      checkDiskEncryption(
        policy("p", 0, { tang: { servers: [{ url: "file:///etc/shadow", thumbprint: THP_A }] } }),
      ),
    (err) => err instanceof PolicyContentError && /^tang\.servers\[0\]\.url: /.test(err.message),
  );
  assert.throws(
    () => checkDiskEncryption(policy("p", 0, { tpm2: { enroll: true, pcrs: [7, 99] } })),
    (err) => err instanceof PolicyContentError && /tpm2\.pcrs\[1\]: must be a PCR number/.test(err.message),
  );
});

Deno.test("the protectors in force: first valid policy in the engine's order per protector, field by field", () => {
  const winners = protectorsInForce([
    policy("low", 1, { tpm2: { enroll: true, pcrs: [7, 11] } }),
    // Highest priority, but its PCR cannot be sealed to: refused, as the enforcer reports it ERROR.
    policy("broken", 9, { tpm2: { enroll: true, pcrs: [99] } }),
    policy("mid", 5, { tpm2: { enroll: true, pcrs: [7] } }),
    policy("tang", 3, { tang: { servers: [{ url: "http://tang.example", thumbprint: THP_A }] } }),
    policy("other-type", 10, { tpm2: { enroll: true, pcrs: [1] } }, "Polkit"),
  ], SILENT_LOGGER);
  const tpm2 = winners.winner("tpm2");
  assert.deepEqual([tpm2?.policy.id, tpm2?.kind === "tpm2" && tpm2.tpm2.pcrs], ["mid", [7]]);
  assert.equal(
    winners.winner("tang")?.policy.id,
    "tang",
    "mid asks for no Tang: the next policy's servers apply",
  );
  assert.deepEqual(winners.ids(), ["tpm2", "tang"]);
});

nodeTest(
  "a lower-priority policy asking for a protector differently is overridden; asking the same is judged",
  { make: () => tempNode({ firefox: false, original: null }), ignore: !haveCryptsetup },
  async (node) => {
    const image = join(node.root, "disk.img");
    await Deno.writeFile(image, new Uint8Array(20 * 1024 * 1024));
    const runner = new Runner();
    const format = await runner.run("cryptsetup", [
      ...["luksFormat", "--type", "luks2", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "-q"],
      ...[image, "--key-file=-"],
    ], { stdin: "unlock" });
    assert.ok(format.success, format.stderr);
    node.config.diskEncryption.devices = ["/disk.img"];
    const io = { fs: node.fs, runner, logger: SILENT_LOGGER, config: node.config, managedPaths: () => [] };
    const servers = (thumbprint: string) => [{ url: "http://tang.example", thumbprint }];
    const { policies } = await diskEncryptionEnforcer.sync([
      policy("top", 9, { tpm2: { enroll: true, pcrs: [7] }, tang: { servers: servers(THP_A) } }),
      policy("same", 5, { tpm2: { enroll: true }, require_encryption: true }),
      policy("other", 1, { tpm2: { enroll: true, pcrs: [7, 11] }, tang: { servers: servers(THP_B) } }),
    ], io as unknown as EnforcerIO);
    const item = (id: string, key: string) => {
      const found = policies.find((p) => p.policyId === id)!.items.find((i) => i.key === key)!;
      return [found.status, found.message];
    };
    // The temp root has no TPM: the protector the winner enrolls is INAPPLICABLE for the node, not overridden.
    const noTpm = ["INAPPLICABLE", "no TPM 2.0 device or systemd-cryptenroll on this node"];
    assert.deepEqual(item("top", "tpm2"), noTpm);
    assert.deepEqual(item("same", "tpm2"), noTpm, "no PCRs means PCR 7, as the winner's");
    assert.deepEqual(item("other", "tpm2"), [
      "INAPPLICABLE",
      'overridden by higher-priority policy "top"; applied value: TPM2 sealed to PCRs 7',
    ]);
    assert.deepEqual(item("other", "tang"), [
      "INAPPLICABLE",
      'overridden by higher-priority policy "top"; applied value: Tang http://tang.example (1 of 1)',
    ]);
    assert.equal(
      item("top", "tang")[1],
      (await runner.which("clevis")) ? "no Tang keyslot" : "clevis is not installed",
    );
    // Requirements are each policy's own, never merged.
    assert.deepEqual(item("same", "requirements"), ["COMPLIANT", "LUKS2 aes-xts-plain64 512 bits"]);
    // An overridden protector does not count against its policy.
    for (const id of ["same", "other"]) {
      const { status, message } = policies.find((p) => p.policyId === id)!;
      assert.deepEqual([status, message], ["COMPLIANT", "1 volume(s) checked"]);
    }
  },
);

Deno.test("every module of agent/disk_encryption/ is at most 250 lines", async () => {
  const sizes: Record<string, number> = {};
  for await (const entry of Deno.readDir(new URL("../../agent/disk_encryption/", import.meta.url))) {
    const text = await Deno.readTextFile(
      new URL(`../../agent/disk_encryption/${entry.name}`, import.meta.url),
    );
    sizes[entry.name] = text.trimEnd().split("\n").length;
  }
  assert.ok(Object.keys(sizes).length >= 6, JSON.stringify(sizes));
  assert.deepEqual(Object.entries(sizes).filter(([, n]) => n > 250), [], JSON.stringify(sizes));
});
