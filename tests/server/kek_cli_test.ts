/**
 * `svc-server kek generate|add FILE [--for ca|disk-encryption]` as an operator runs it: the next steps name
 * the setting the file is for (`ca.key_encryption_key_file` seals the server's secrets,
 * `disk_encryption.kek_file` escrowed recovery keys), both when the purpose is not given, and the rotation
 * steps of that setting (a restart of every replica, or the re-wrap call).
 */
import assert from "node:assert/strict";
import { join } from "node:path";

const MAIN = new URL("../../server/main.ts", import.meta.url).pathname;

async function kek(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const result = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", MAIN, "kek", ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes).trim();
  return { code: result.code, out: text(result.stdout), err: text(result.stderr) };
}

Deno.test("svc-server kek names the setting the key file is for", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const ca = await kek("generate", join(dir, "secrets.kek"), "--for", "ca");
    assert.equal(ca.code, 0, ca.err);
    assert.match(ca.out, /set ca\.key_encryption_key_file to it .*every replica/);
    assert.doesNotMatch(ca.out, /disk_encryption/);
    assert.equal((await Deno.stat(join(dir, "secrets.kek"))).mode! & 0o777, 0o600);

    const disk = await kek("generate", join(dir, "disk.kek"), "--for", "disk-encryption");
    assert.equal(disk.code, 0, disk.err);
    assert.match(disk.out, /set disk_encryption\.kek_file to it/);
    assert.doesNotMatch(disk.out, /ca\.key_encryption_key_file/);

    const either = await kek("generate", join(dir, "either.kek"));
    assert.equal(either.code, 0, either.err);
    assert.match(either.out, /ca\.key_encryption_key_file .*disk_encryption\.kek_file .*--for/);

    const rotateCa = await kek("add", join(dir, "secrets.kek"), "--for", "ca");
    assert.equal(rotateCa.code, 0, rotateCa.err);
    assert.match(rotateCa.out, /restart them/);
    assert.doesNotMatch(
      rotateCa.out,
      /rewrap/,
      "the disk-encryption re-wrap does not touch the CA's secrets",
    );
    const rotateDisk = await kek("add", join(dir, "disk.kek"), "--for", "disk-encryption");
    assert.match(rotateDisk.out, /POST \/api\/v1\/disk-encryption\/kek\/rewrap/);

    const wrong = await kek("generate", join(dir, "other.kek"), "--for", "tls");
    assert.equal(wrong.code, 2);
    assert.match(wrong.err, /--for ca\|disk-encryption/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
