/**
 * The CA and session secret kept in the database: created once and shared by every server on the same
 * database, sealed under the key file (a dump without it opens nothing; a wrong key file is refused with a
 * message), legacy `{data_dir}/pki/ca/` imported, a different legacy CA refused, key rotation re-seals.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { dbTest } from "../helpers/db.ts";
import { loadOrCreateCa } from "../../server/pki/ca.ts";
import { CA_SECRET, loadSharedCa, loadSharedJwtSecret } from "../../server/pki/ca_store.ts";
import { openSecretStore } from "../../server/pki/secret_store.ts";
import { decodeCertificate, generateKeyAndCsr } from "../../shared/pki/csr.ts";
import { addKekToFile, createKekFile } from "../../server/pki/envelope.ts";

async function tempDir(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "svc-pki-db-" });
}

dbTest("CA in the database: created once, shared by a second server with the same key file", async (db) => {
  const a = await tempDir();
  const b = await tempDir();
  try {
    const keyFile = join(a, "secrets.kek");
    const first = await loadSharedCa({ store: openSecretStore({ db, path: keyFile }), dataDir: a });
    assert.equal(first.origin, "created");
    assert.equal(first.ca.generated, true);
    assert.equal(((await Deno.stat(keyFile)).mode ?? 0) & 0o777, 0o600, "key file is private");
    // The public copy for scripts; no private key on disk.
    assert.equal(await Deno.readTextFile(join(a, "pki/ca/ca.crt")), first.ca.certPem);
    await assert.rejects(Deno.stat(join(a, "pki/ca/ca.key")), Deno.errors.NotFound);

    const second = await loadSharedCa({ store: openSecretStore({ db, path: keyFile }), dataDir: b });
    assert.equal(second.origin, "database");
    assert.equal(second.ca.certPem, first.ca.certPem);
    // The second server signs with the same key: its certificate verifies under the first's CA.
    const { csrPem } = await generateKeyAndCsr("node-1");
    const signed = await second.ca.signCsr(csrPem, { commonName: "node-1" });
    assert.ok(
      await decodeCertificate(signed.certPem).verify({
        publicKey: first.ca.cert.publicKey,
        signatureOnly: true,
      }),
    );

    // The row holds no private key in clear.
    const [row] = await db.query<{ sealed: Uint8Array }>(
      "SELECT sealed FROM server_secrets WHERE name = $1",
      [
        CA_SECRET,
      ],
    );
    assert.ok(!new TextDecoder().decode(row.sealed).includes("PRIVATE KEY"));

    const s1 = await loadSharedJwtSecret(openSecretStore({ db, path: keyFile }));
    const s2 = await loadSharedJwtSecret(openSecretStore({ db, path: keyFile }));
    assert.equal(s1, s2);
    assert.match(s1, /^[0-9a-f]{64}$/);
  } finally {
    await Deno.remove(a, { recursive: true });
    await Deno.remove(b, { recursive: true });
  }
});

dbTest(
  "CA in the database: another key file, a missing one, a readable one, a tampered row are refused",
  async (db) => {
    const a = await tempDir();
    const b = await tempDir();
    try {
      const keyFile = join(a, "secrets.kek");
      await loadSharedCa({ store: openSecretStore({ db, path: keyFile }), dataDir: a });
      // A replica that made its own key file cannot open the CA, and says what to do.
      const other = join(b, "own.kek");
      await createKekFile(other);
      await Deno.chmod(other, 0o600);
      await assert.rejects(
        loadSharedCa({ store: openSecretStore({ db, path: other }), dataDir: b }),
        /sealed with key-encryption key .* does not hold: give this server the same key file/,
      );
      // Missing while the database holds secrets: not created, the message names the file to copy.
      const missing = join(b, "missing.kek");
      await assert.rejects(
        loadSharedCa({ store: openSecretStore({ db, path: missing }), dataDir: b }),
        /does not exist, but the database already holds secrets .* copy the key file/,
      );
      await assert.rejects(Deno.stat(missing), Deno.errors.NotFound);
      // Group-readable key file.
      await Deno.chmod(keyFile, 0o640);
      await assert.rejects(
        loadSharedCa({ store: openSecretStore({ db, path: keyFile }), dataDir: b }),
        /readable by group or others .* chmod 600/,
      );
      await Deno.chmod(keyFile, 0o600);
      // A sealed value moved to another row does not open (the row name is bound into the seal).
      await db.query(
        `INSERT INTO server_secrets (name, public_pem, kek_id, sealed)
       SELECT 'jwt_secret', '', kek_id, sealed FROM server_secrets WHERE name = 'ca'`,
      );
      await assert.rejects(
        loadSharedJwtSecret(openSecretStore({ db, path: keyFile })),
        /does not open with key/,
      );
    } finally {
      await Deno.remove(a, { recursive: true });
      await Deno.remove(b, { recursive: true });
    }
  },
);

dbTest("CA in the database: a legacy data-dir CA is imported; a different one is refused", async (db) => {
  const a = await tempDir();
  const b = await tempDir();
  try {
    const legacy = await loadOrCreateCa({ dataDir: a });
    const keyFile = join(a, "secrets.kek");
    const imported = await loadSharedCa({ store: openSecretStore({ db, path: keyFile }), dataDir: a });
    assert.equal(imported.origin, "imported");
    assert.equal(imported.ca.certPem, legacy.certPem);
    // Second start: same CA, from the database, files only compared.
    const again = await loadSharedCa({ store: openSecretStore({ db, path: keyFile }), dataDir: a });
    assert.equal(again.origin, "database");
    // A replica whose data dir holds another CA stops instead of locking agents out.
    await loadOrCreateCa({ dataDir: b });
    await assert.rejects(
      loadSharedCa({ store: openSecretStore({ db, path: keyFile }), dataDir: b }),
      /holds a different CA .* than the one in the database/,
    );
  } finally {
    await Deno.remove(a, { recursive: true });
    await Deno.remove(b, { recursive: true });
  }
});

dbTest("CA in the database: a new current key in the file re-seals the rows", async (db) => {
  const a = await tempDir();
  try {
    const keyFile = join(a, "secrets.kek");
    const first = await loadSharedCa({ store: openSecretStore({ db, path: keyFile }), dataDir: a });
    const [before] = await db.query<{ kek_id: string }>(
      "SELECT kek_id FROM server_secrets WHERE name = 'ca'",
    );
    const newId = await addKekToFile(keyFile);
    const again = await loadSharedCa({ store: openSecretStore({ db, path: keyFile }), dataDir: a });
    assert.equal(again.ca.certPem, first.ca.certPem);
    const [after] = await db.query<{ kek_id: string }>("SELECT kek_id FROM server_secrets WHERE name = 'ca'");
    assert.notEqual(after.kek_id, before.kek_id);
    assert.equal(after.kek_id, newId);
    // The old line can go now.
    const lines = (await Deno.readTextFile(keyFile)).trim().split("\n");
    await Deno.writeTextFile(keyFile, lines[0] + "\n");
    const third = await loadSharedCa({ store: openSecretStore({ db, path: keyFile }), dataDir: a });
    assert.equal(third.ca.certPem, first.ca.certPem);
  } finally {
    await Deno.remove(a, { recursive: true });
  }
});

dbTest("CA in the database: concurrent first starts end with one CA and one secret", async (db) => {
  const dirs = await Promise.all([tempDir(), tempDir(), tempDir(), tempDir()]);
  try {
    const keyFile = join(dirs[0], "secrets.kek");
    const results = await Promise.all(
      dirs.map((dir) => loadSharedCa({ store: openSecretStore({ db, path: keyFile }), dataDir: dir })),
    );
    assert.equal(new Set(results.map((r) => r.ca.certPem)).size, 1);
    assert.equal(results.filter((r) => r.origin === "created").length, 1);
    const secrets = await Promise.all(
      dirs.map(() => loadSharedJwtSecret(openSecretStore({ db, path: keyFile }))),
    );
    assert.equal(new Set(secrets).size, 1);
    const [n] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM server_secrets");
    assert.equal(n.n, 2);
  } finally {
    for (const d of dirs) await Deno.remove(d, { recursive: true });
  }
});
