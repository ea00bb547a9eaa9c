/**
 * DiskEncryption compliance on real headers: LUKS2 and LUKS1 images and an unencrypted file, checked
 * against policies per volume; nothing is written to any header. lsblk parsing on this machine's real
 * output and on a typical laptop layout (LUKS root with LVM, ESP, /boot, USB stick).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { buildAgentConfig } from "../../agent/config.ts";
import { RootFs } from "../../agent/fs.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { Runner } from "../../agent/runner.ts";
import { diskEncryptionEnforcer } from "../../agent/disk_encryption/enforcer.ts";
import { devicesFromLsblk } from "../../agent/disk_encryption/inventory.ts";
import { readHeader } from "../../agent/disk_encryption/cryptsetup.ts";
import type { CachedPolicy, EnforcerIO } from "../../agent/sync/types.ts";

const haveCryptsetup = await Deno.stat("/usr/sbin/cryptsetup").then(() => true, () => false);
if (!haveCryptsetup) console.log("skipped: the DiskEncryption enforcer test needs cryptsetup");
const runner = new Runner();
const FAST = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];

async function image(root: string, name: string, format?: string[]): Promise<string> {
  const host = join(root, "images", name);
  const f = await Deno.open(host, { create: true, write: true });
  await f.truncate(20 * 1024 * 1024);
  f.close();
  if (format) {
    const r = await runner.run("cryptsetup", ["luksFormat", ...format, ...FAST, "-q", host, "--key-file=-"], {
      stdin: "secret",
    });
    assert.ok(r.success, r.stderr);
  }
  return host;
}

function policy(id: string, content: Record<string, unknown>): CachedPolicy {
  return { id, name: id, type: "DiskEncryption", version: 1, priority: 0, content: JSON.stringify(content) };
}

Deno.test({
  name: "DiskEncryption compliance per volume on real LUKS2/LUKS1 headers, read-only",
  ignore: !haveCryptsetup,
  async fn() {
    const base = await Deno.makeTempDir({ prefix: "svc-de-enf-" });
    try {
      const root = join(base, "node");
      await Deno.mkdir(join(root, "images"), { recursive: true });
      const luks2 = await image(root, "luks2.img", ["--type", "luks2"]);
      await image(root, "luks1.img", ["--type", "luks1"]);
      await image(root, "plain.img");
      const before = await readHeader(runner, luks2);
      const { config } = buildAgentConfig({
        agent: { client_id: "pc-1", root_dir: root },
        enrollment: { data_dir: join(base, "data") },
        disk_encryption: { devices: "/images/luks2.img,/images/luks1.img,/images/plain.img" },
      }, "test");
      const io: EnforcerIO = {
        fs: await RootFs.open(root),
        runner,
        logger: SILENT_LOGGER,
        config,
        managedPaths: () => [],
        writeManaged: () => Promise.reject(new Error("the DiskEncryption enforcer must not write files")),
        releaseManaged: () => Promise.reject(new Error("the DiskEncryption enforcer must not release files")),
      };
      const result = await diskEncryptionEnforcer.sync([
        policy("a-strict", {
          require_encryption: true,
          min_luks_version: 2,
          allowed_ciphers: ["aes-xts-plain64"],
          min_key_size_bits: 512,
          escrow_recovery_key: true,
          tpm2: { enroll: true, pcrs: [7] },
        }),
        policy("b-lenient", { allowed_ciphers: ["aes-xts-plain64", "aes-cbc-essiv:sha256"] }),
      ], io);
      const [strict, lenient] = result.policies;
      const item = (r: typeof strict, device: string, key: string) =>
        r.items.find((i) => i.schemaId === device && i.key === key);
      assert.equal(item(strict, "/images/luks2.img", "requirements")?.status, "COMPLIANT");
      assert.match(
        item(strict, "/images/luks2.img", "requirements")!.message,
        /LUKS2 aes-xts-plain64 512 bits/,
      );
      assert.equal(item(strict, "/images/luks1.img", "requirements")?.status, "NON_COMPLIANT");
      assert.match(
        item(strict, "/images/luks1.img", "requirements")!.message,
        /LUKS1 header; the policy requires LUKS2/,
      );
      assert.deepEqual(item(strict, "/images/plain.img", "requirements"), {
        schemaId: "/images/plain.img",
        key: "requirements",
        status: "NON_COMPLIANT",
        message: "volume is not encrypted",
      });
      assert.equal(item(strict, "/images/luks2.img", "recovery_key")?.status, "NON_COMPLIANT");
      // The temp root has no /sys/class/tpm: TPM2 is inapplicable, not a failure.
      assert.equal(item(strict, "/images/luks2.img", "tpm2")?.status, "INAPPLICABLE");
      assert.equal(strict.status, "NON_COMPLIANT");
      // The lenient policy does not require encryption and accepts both ciphers.
      assert.equal(lenient.status, "COMPLIANT", JSON.stringify(lenient.items));
      assert.equal(item(lenient, "/images/plain.img", "requirements")?.status, "COMPLIANT");
      assert.equal(result.changed.length, 0);
      assert.deepEqual(await readHeader(runner, luks2), before, "the header is unchanged");
    } finally {
      await Deno.remove(base, { recursive: true });
    }
  },
});

Deno.test("lsblk: this machine's real output parses; a laptop layout yields root LUKS and fixed volumes only", async () => {
  const real = await runner.run("lsblk", [
    "-J",
    "-l",
    "-p",
    "-o",
    "NAME,TYPE,FSTYPE,UUID,MOUNTPOINT,RM,HOTPLUG,PKNAME",
  ]);
  if (real.success) {
    const parsed = devicesFromLsblk(JSON.parse(real.stdout));
    assert.ok(parsed.luks instanceof Map && Array.isArray(parsed.plain));
  }
  const laptop = {
    blockdevices: [
      {
        name: "/dev/nvme0n1",
        type: "disk",
        fstype: null,
        uuid: null,
        mountpoint: null,
        rm: false,
        hotplug: false,
        pkname: null,
      },
      {
        name: "/dev/nvme0n1p1",
        type: "part",
        fstype: "vfat",
        uuid: "A1",
        mountpoint: "/boot/efi",
        rm: false,
        hotplug: false,
        pkname: "/dev/nvme0n1",
      },
      {
        name: "/dev/nvme0n1p2",
        type: "part",
        fstype: "ext4",
        uuid: "B2",
        mountpoint: "/boot",
        rm: false,
        hotplug: false,
        pkname: "/dev/nvme0n1",
      },
      {
        name: "/dev/nvme0n1p3",
        type: "part",
        fstype: "crypto_LUKS",
        uuid: "c8beb43e-b03e-4809-9391-346d86e9cb70",
        mountpoint: null,
        rm: false,
        hotplug: false,
        pkname: "/dev/nvme0n1",
      },
      {
        name: "/dev/mapper/luks-c8be",
        type: "crypt",
        fstype: "LVM2_member",
        uuid: "X",
        mountpoint: null,
        rm: false,
        hotplug: false,
        pkname: "/dev/nvme0n1p3",
      },
      {
        name: "/dev/mapper/vg-root",
        type: "lvm",
        fstype: "ext4",
        uuid: "Y",
        mountpoint: "/",
        rm: false,
        hotplug: false,
        pkname: "/dev/mapper/luks-c8be",
      },
      {
        name: "/dev/mapper/vg-home",
        type: "lvm",
        fstype: "ext4",
        uuid: "Z",
        mountpoint: "/home",
        rm: false,
        hotplug: false,
        pkname: "/dev/mapper/luks-c8be",
      },
      {
        name: "/dev/sda",
        type: "disk",
        fstype: null,
        uuid: null,
        mountpoint: null,
        rm: false,
        hotplug: false,
        pkname: null,
      },
      {
        name: "/dev/sda1",
        type: "part",
        fstype: "ext4",
        uuid: "D1",
        mountpoint: "/srv",
        rm: false,
        hotplug: false,
        pkname: "/dev/sda",
      },
      {
        name: "/dev/sdb",
        type: "disk",
        fstype: null,
        uuid: null,
        mountpoint: null,
        rm: true,
        hotplug: true,
        pkname: null,
      },
      {
        name: "/dev/sdb1",
        type: "part",
        fstype: "crypto_LUKS",
        uuid: "E1",
        mountpoint: null,
        rm: false,
        hotplug: false,
        pkname: "/dev/sdb",
      },
      {
        name: "/dev/loop0",
        type: "loop",
        fstype: "squashfs",
        uuid: null,
        mountpoint: "/snap/core/1",
        rm: false,
        hotplug: false,
        pkname: null,
      },
    ],
  };
  const { luks, plain } = devicesFromLsblk(laptop);
  assert.deepEqual([...luks], [["/dev/nvme0n1p3", { mapperName: "luks-c8be", mountPoint: "/", root: true }]]);
  assert.deepEqual(plain, [{ device: "/dev/sda1", mountPoint: "/srv", root: false }]);
});
