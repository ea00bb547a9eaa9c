/**
 * Enrollment data on disk: checks on what the server issued, and crash-safe renewal (an
 * interrupted key/certificate swap is finished or rolled back, never left mismatched).
 */
import assert from "node:assert/strict";
import { loadOrCreateCa } from "../../server/pki/mod.ts";
import { generateKeyAndCsr } from "../../shared/pki/csr.ts";
import {
  checkIssuedCertificate,
  isEnrolled,
  keyMatchesCert,
  loadIdentity,
  writeEnrollment,
  writeRenewal,
} from "../../agent/identity.ts";
import { renewalDue } from "../../agent/renew.ts";

async function setup() {
  const dir = await Deno.makeTempDir({ prefix: "svc-agent-identity-" });
  const ca = await loadOrCreateCa({ dataDir: `${dir}/server` });
  const issue = async (cn: string, validityDays = 90) => {
    const keys = await generateKeyAndCsr(cn);
    const signed = await ca.signCsr(keys.csrPem, { commonName: cn, validityDays });
    return { keyPem: keys.keyPem, certPem: signed.certPem };
  };
  return { dir, ca, caPem: ca.certPem, issue, cleanup: () => Deno.remove(dir, { recursive: true }) };
}

Deno.test("issued certificates are checked: key, CA signature, common name", async () => {
  const { dir, caPem, issue, cleanup } = await setup();
  try {
    const a = await issue("node-a");
    const b = await issue("node-b");
    await checkIssuedCertificate({ certPem: a.certPem, caPem, keyPem: a.keyPem, commonName: "node-a" });
    await assert.rejects(
      checkIssuedCertificate({ certPem: a.certPem, caPem, keyPem: b.keyPem, commonName: "node-a" }),
      /different key/,
    );
    await assert.rejects(
      checkIssuedCertificate({ certPem: a.certPem, caPem, keyPem: a.keyPem, commonName: "node-x" }),
      /for "node-a", expected "node-x"/,
    );
    const other = await loadOrCreateCa({ dataDir: `${dir}/other` });
    await assert.rejects(
      checkIssuedCertificate({
        certPem: a.certPem,
        caPem: other.certPem,
        keyPem: a.keyPem,
        commonName: "node-a",
      }),
      /not signed by its CA/,
    );
  } finally {
    await cleanup();
  }
});

Deno.test("enrollment files: key 0600 in a 0750 directory; a re-enrollment replaces the pair", async () => {
  const { dir, caPem, issue, cleanup } = await setup();
  try {
    const data = `${dir}/agent`;
    const a = await issue("n1");
    await writeEnrollment(data, { ...a, caPem });
    assert.equal(await isEnrolled(data), true);
    assert.equal((await Deno.stat(data)).mode! & 0o777, 0o750);
    assert.equal((await Deno.stat(`${data}/agent.key`)).mode! & 0o777, 0o600);
    assert.deepEqual(await loadIdentity(data), { ...a, caPem });
    const b = await issue("n1");
    await writeEnrollment(data, { ...b, caPem });
    assert.deepEqual(await loadIdentity(data), { ...b, caPem });
    assert.equal((await Deno.stat(`${data}/agent.key`)).mode! & 0o777, 0o600);
    assert.deepEqual([...Deno.readDirSync(data)].map((e) => e.name).sort(), [
      "agent.crt",
      "agent.key",
      "ca.crt",
    ]);
  } finally {
    await cleanup();
  }
});

Deno.test("renewal swap survives a crash at every step", async () => {
  const { dir, caPem, issue, cleanup } = await setup();
  try {
    const data = `${dir}/agent`;
    const old = await issue("n1");
    const fresh = await issue("n1");
    assert.equal(keyMatchesCert(fresh.keyPem, old.certPem), false);

    // Crash after the new pair was staged: the swap is finished.
    await writeEnrollment(data, { ...old, caPem });
    await Deno.writeTextFile(`${data}/agent.key.prev`, old.keyPem);
    await Deno.writeTextFile(`${data}/agent.key.new`, fresh.keyPem);
    await Deno.writeTextFile(`${data}/agent.crt.new`, fresh.certPem);
    assert.deepEqual(await loadIdentity(data), { ...fresh, caPem });

    // Crash after the key was renamed but before the certificate: the old key is put back.
    await writeEnrollment(data, { keyPem: fresh.keyPem, certPem: old.certPem, caPem });
    await Deno.writeTextFile(`${data}/agent.key.prev`, old.keyPem);
    assert.deepEqual(await loadIdentity(data), { ...old, caPem });

    // Mismatch without any way back is an error that says what to do.
    await writeEnrollment(data, { keyPem: fresh.keyPem, certPem: old.certPem, caPem });
    await assert.rejects(loadIdentity(data), /does not belong to agent\.crt; enroll again/);

    // The normal path.
    await writeEnrollment(data, { ...old, caPem });
    await writeRenewal(data, fresh.keyPem, fresh.certPem);
    assert.deepEqual(await loadIdentity(data), { ...fresh, caPem });
    assert.deepEqual((await Array.fromAsync(Deno.readDir(data), (e) => e.name)).sort(), [
      "agent.crt",
      "agent.key",
      "ca.crt",
    ]);
  } finally {
    await cleanup();
  }
});

Deno.test("renewal is due within 30 days of expiry", () => {
  const now = new Date("2030-01-01T00:00:00Z");
  const day = 86_400_000;
  assert.equal(renewalDue(new Date(now.getTime() + 10 * day), now), true);
  assert.equal(renewalDue(new Date(now.getTime() + 30 * day), now), true);
  assert.equal(renewalDue(new Date(now.getTime() + 31 * day), now), false);
});
