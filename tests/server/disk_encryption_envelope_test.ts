/**
 * Envelope encryption attacked directly: a seal opens only with its KEK and only for its own row (a
 * ciphertext or wrapped data key moved to another row, or a flipped bit, is refused); re-wrapping keeps the
 * recovery-key ciphertext and opens under the new KEK alone; bad KEK files are refused with the fix named.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  addKekToFile,
  createKekFile,
  KekError,
  loadKeyring,
  openRecoveryKey,
  parseKeyring,
  rewrapDataKey,
  sealRecoveryKey,
} from "../../server/pki/envelope.ts";
import { generateRecoveryKey } from "../../agent/disk_encryption/recovery_key.ts";

Deno.test("envelope: seals open only with their KEK, for their row, unaltered", async () => {
  const dir = await Deno.makeTempDir({ prefix: "svc-de-env-" });
  try {
    const file = join(dir, "kek");
    await createKekFile(file);
    await assert.rejects(createKekFile(file), Deno.errors.AlreadyExists, "never overwrites a KEK");
    const keyring = await loadKeyring(file);
    const key = generateRecoveryKey();
    const a = crypto.randomUUID();
    const b = crypto.randomUUID();
    const sealed = await sealRecoveryKey(keyring, a, key);
    assert.equal(await openRecoveryKey(keyring, a, sealed), key);
    // Same key twice: different nonces and data keys, nothing in common.
    const again = await sealRecoveryKey(keyring, a, key);
    assert.notDeepEqual(again.ciphertext, sealed.ciphertext);
    assert.notDeepEqual(again.wrappedDataKey, sealed.wrappedDataKey);
    // Moved to another row.
    await assert.rejects(openRecoveryKey(keyring, b, sealed), KekError);
    // Data key of one row with the ciphertext of another.
    await assert.rejects(openRecoveryKey(keyring, a, { ...sealed, ciphertext: again.ciphertext }), KekError);
    // One flipped bit anywhere.
    for (const field of ["ciphertext", "wrappedDataKey"] as const) {
      const bytes = new Uint8Array(sealed[field]);
      bytes[bytes.length - 1] ^= 1;
      await assert.rejects(openRecoveryKey(keyring, a, { ...sealed, [field]: bytes }), KekError);
    }
    // Another KEK file cannot open it, and says which KEK is missing.
    const other = await parseKeyring(
      `other ${btoa(String.fromCharCode(...new Uint8Array(32).fill(7)))}\n`,
      "x",
    );
    await assert.rejects(openRecoveryKey(other, a, sealed), /wrapped by KEK "kek-/);

    // Rotation: a new current KEK; the re-wrap opens with the new KEK alone.
    const newId = await addKekToFile(file);
    const both = await loadKeyring(file);
    assert.equal(both.currentId, newId);
    const rewrapped = await rewrapDataKey(both, a, sealed);
    assert.equal(rewrapped.kekId, newId);
    assert.deepEqual(rewrapped.ciphertext, sealed.ciphertext);
    const lines = (await Deno.readTextFile(file)).split("\n").filter((l) => l.startsWith(newId));
    const onlyNew = await parseKeyring(lines.join("\n"), file);
    assert.equal(await openRecoveryKey(onlyNew, a, rewrapped), key);
    await assert.rejects(openRecoveryKey(onlyNew, a, sealed), KekError);
    assert.equal((await Deno.stat(file)).mode! & 0o777, 0o600);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("envelope: bad KEK files are refused with the fix", async () => {
  const dir = await Deno.makeTempDir({ prefix: "svc-de-env-" });
  try {
    await assert.rejects(
      loadKeyring(join(dir, "missing")),
      /does not exist; create it with: svc-server kek generate/,
    );
    const loose = join(dir, "loose");
    await createKekFile(loose);
    await Deno.chmod(loose, 0o644);
    await assert.rejects(loadKeyring(loose), /readable by group or others.*chmod 600/);
    await assert.rejects(parseKeyring("", "f"), /holds no key/);
    await assert.rejects(parseKeyring("k1 c2hvcnQ=\n", "f"), /f line 1: the key must be 32 bytes/);
    await assert.rejects(parseKeyring("k1 not*base64\n", "f"), /not valid base64/);
    await assert.rejects(parseKeyring("bad id here\n", "f"), /expected "<kek-id> <base64/);
    const k = btoa(String.fromCharCode(...new Uint8Array(32)));
    await assert.rejects(
      parseKeyring(`a ${k}\n# comment\na ${k}\n`, "f"),
      /line 3: key id "a" is listed twice/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
