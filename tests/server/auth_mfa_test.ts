/**
 * Second factors end to end through the real app: TOTP enrolment, the two-step login with its single-use
 * pending token, replay refusal, backup codes, step-up with the second factor, admin reset, the MFA policy,
 * secrets sealed at rest, and audit rows for every attempt.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, type TestClient, type TestServer } from "../helpers/app.ts";
import { base32Decode, hotp, totpStep } from "../../server/auth/totp.ts";
import { createSecretSealer } from "../../server/auth/mfa.ts";

const OTHER_IP = "10.1.0.2";
const JWT_SECRET = "test-jwt-secret-for-mfa-0123456789abcdef";

/** The code of the step `delta` steps from now. */
async function codeAt(secret: string, delta = 0): Promise<string> {
  return await hotp(base32Decode(secret), totpStep(Date.now()) + delta);
}

/** Enrols `client` in TOTP; returns the base32 secret and the backup codes. */
async function enrol(client: TestClient): Promise<{ secret: string; backupCodes: string[] }> {
  const start = await client.request("POST", "/api/v1/auth/mfa/totp", { password: client.password });
  assert.equal(start.status, 200, start.text);
  const confirm = await client.request("POST", "/api/v1/auth/mfa/totp/confirm", {
    code: await codeAt(start.json.secret),
  });
  assert.equal(confirm.status, 200, confirm.text);
  return { secret: start.json.secret, backupCodes: confirm.json.backup_codes };
}

/** The first login step; returns the pending token. */
async function passwordStep(server: TestServer, client: TestClient): Promise<string> {
  const anon = server.anonymous({ ip: client.ip });
  const res = await anon.request("POST", "/api/v1/auth/login", {
    username: client.user.username,
    password: client.password,
  });
  assert.equal(res.status, 200, res.text);
  assert.ok(res.json.second_factor_required, `second factor asked: ${res.text}`);
  assert.ok(
    !res.headers.getSetCookie().some((l) => l.startsWith("svc_session=") || l.startsWith("svc_refresh=")),
    "no session before the second factor",
  );
  assert.equal(res.json.user, undefined, "nothing about the user before the second factor");
  return res.json.second_factor_required.token;
}

async function secondStep(
  server: TestServer,
  token: string,
  proof: Record<string, string>,
  ip = "127.0.0.1",
) {
  const anon = server.anonymous({ ip });
  const res = await anon.request("POST", "/api/v1/auth/login/second-factor", { token, ...proof });
  return { res, anon };
}

async function auditRows(server: TestServer, action: string) {
  return await server.ctx.db.query<{ outcome: string; details: Record<string, unknown> }>(
    "SELECT outcome, details FROM audit_logs WHERE action = $1 ORDER BY created_at",
    [action],
  );
}

dbTest("TOTP: enrol, two-step login, replay refused, backup codes, step-up, admin reset", async (db) => {
  const server = await createTestServer({ db, config: { security: { jwtSecret: JWT_SECRET } } });
  try {
    const alice = await server.loginAs({ username: "alice", permissions: ["user:view", "settings:view"] });
    const me0 = await alice.request("GET", "/api/v1/auth/me");
    assert.equal(me0.json.features.mfa, true);
    assert.deepEqual(me0.json.second_factor, {
      totp: false,
      backup_codes_left: 0,
      webauthn: 0,
      enrolment_required: false,
    });

    // Enrolment needs the password (a borrowed session cannot add the attacker's phone).
    const bare = await alice.request("POST", "/api/v1/auth/mfa/totp", {});
    assert.equal(bare.status, 403);
    assert.equal(bare.json.error.code, "reauthentication_required");
    const start = await alice.request("POST", "/api/v1/auth/mfa/totp", { password: alice.password });
    assert.equal(start.status, 200, start.text);
    assert.match(start.json.secret, /^[A-Z2-7]{32}$/);
    const uri = new URL(start.json.otpauth_uri);
    assert.equal(uri.searchParams.get("secret"), start.json.secret);
    assert.ok(start.json.otpauth_uri.startsWith("otpauth://totp/svc:alice?"));
    const secret: string = start.json.secret;

    // Sealed at rest, bound to the user.
    const [row] = await db.query<{ secret_sealed: string }>("SELECT secret_sealed FROM user_totp");
    assert.ok(!row.secret_sealed.includes(secret));
    assert.match(row.secret_sealed, /^v2\./, "sealed under the TOTP key");
    const sealer = createSecretSealer(server.ctx.totpKey);
    assert.equal(
      new TextDecoder().decode(await sealer.open(alice.user.id, row.secret_sealed)),
      new TextDecoder().decode(base32Decode(secret)),
    );
    await assert.rejects(
      sealer.open(crypto.randomUUID(), row.secret_sealed),
      "another user's row does not open",
    );
    await assert.rejects(
      createSecretSealer(crypto.getRandomValues(new Uint8Array(32)), JWT_SECRET).open(
        alice.user.id,
        row.secret_sealed,
      ),
      "the session secret does not open it",
    );

    // Not a factor until confirmed: login stays one step.
    const unconfirmed = await server.anonymous().request("POST", "/api/v1/auth/login", {
      username: "alice",
      password: alice.password,
    });
    assert.equal(unconfirmed.json.user.username, "alice");

    const wrong = await alice.request("POST", "/api/v1/auth/mfa/totp/confirm", {
      code: String((Number(await codeAt(secret)) + 1) % 1_000_000).padStart(6, "0"),
    });
    assert.equal(wrong.status, 400);
    assert.equal(wrong.json.error.code, "invalid_code");
    const enrolCode = await codeAt(secret);
    const confirm = await alice.request("POST", "/api/v1/auth/mfa/totp/confirm", { code: enrolCode });
    assert.equal(confirm.status, 200, confirm.text);
    const backup: string[] = confirm.json.backup_codes;
    assert.equal(backup.length, 10);
    assert.equal(new Set(backup).size, 10);
    for (const code of backup) assert.match(code, /^[a-z2-9]{4}-[a-z2-9]{4}-[a-z2-9]{4}$/);
    const stored = await db.query<{ code_hash: string }>("SELECT code_hash FROM user_backup_codes");
    assert.equal(stored.length, 10);
    assert.ok(stored.every((r) => !backup.some((b) => r.code_hash.includes(b.replaceAll("-", "")))));
    const confirmAudit = await auditRows(server, "mfa.totp_enrol");
    assert.equal(
      JSON.stringify(confirmAudit).includes(enrolCode),
      false,
      "the code is masked in the audit row",
    );
    const again = await alice.request("POST", "/api/v1/auth/mfa/totp", { password: alice.password });
    assert.equal(again.status, 403, "a second enrolment needs the second factor too");
    assert.equal(again.json.error.code, "second_factor_required");

    // Login: the code used to confirm cannot be replayed (same step).
    let token = await passwordStep(server, alice);
    const replay = await secondStep(server, token, { code: enrolCode });
    assert.equal(replay.res.status, 401);
    assert.equal(replay.res.json.error.code, "invalid_code");
    const next = await codeAt(secret, 1);
    const ok = await secondStep(server, token, { code: next });
    assert.equal(ok.res.status, 200, ok.res.text);
    assert.equal(ok.res.json.user.username, "alice");
    assert.ok(ok.anon.cookie("svc_session"));
    assert.equal((await ok.anon.request("GET", "/api/v1/auth/me")).status, 200);

    // The pending token is single-use; the code too, within and across its window.
    const reuseToken = await secondStep(server, token, { code: await codeAt(secret, 1) });
    assert.equal(reuseToken.res.json.error.code, "login_expired");
    token = await passwordStep(server, alice);
    for (const code of [next, await codeAt(secret, 0), await codeAt(secret, -1)]) {
      const r = await secondStep(server, token, { code });
      assert.equal(r.res.status, 401, `code ${code} replayed or older than the last one`);
    }
    // Two more wrong codes (five in all) end this pending login even for a right backup code.
    await secondStep(server, token, { code: "000000" });
    const fifth = await secondStep(server, token, { code: "000001" });
    assert.equal(fifth.res.json.error.code, "login_expired");
    const dead = await secondStep(server, token, { backup_code: backup[0] });
    assert.equal(dead.res.json.error.code, "login_expired");
    const garbage = await secondStep(server, "not-a-token", { code: "123456" });
    assert.equal(garbage.res.json.error.code, "login_expired");

    // Six wrong codes from one address for one account: the next attempt waits, counted in the database.
    token = await passwordStep(server, alice);
    const throttled = await secondStep(server, token, { backup_code: backup[0] });
    assert.equal(throttled.res.status, 429, throttled.res.text);
    assert.ok(Number(throttled.res.headers.get("retry-after")) > 0);
    const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM login_throttle");
    assert.ok(n > 0);

    // Backup codes (from another address): any spelling, once.
    const withBackup = await secondStep(
      server,
      token,
      { backup_code: ` ${backup[0].toUpperCase()} ` },
      OTHER_IP,
    );
    assert.equal(withBackup.res.status, 200, withBackup.res.text);
    token = await passwordStep(server, alice);
    const backupReplay = await secondStep(server, token, { backup_code: backup[0] }, OTHER_IP);
    assert.equal(backupReplay.res.status, 401);
    const meNow = await withBackup.anon.request("GET", "/api/v1/auth/me");
    assert.equal(meNow.json.second_factor.backup_codes_left, 9);

    // Audit: every attempt with its outcome.
    const failures = await auditRows(server, "auth.login_second_factor");
    assert.ok(failures.length >= 8, `failures audited: ${failures.length}`);
    assert.ok(failures.every((r) => r.outcome === "failure"));
    assert.ok(!JSON.stringify(failures).includes(backup[0]), "codes never reach the audit log");
    const logins = await auditRows(server, "auth.login");
    assert.ok(logins.some((r) => r.details.second_factor === "totp"));
    assert.ok(logins.some((r) => r.details.second_factor === "backup_code"));
    assert.ok((await auditRows(server, "auth.login_password")).length >= 4);

    // Step-up with the second factor: password alone is not enough, a wrong code fails, a backup code works.
    const alice2 = withBackup.anon;
    const noCode = await alice2.request("POST", "/api/v1/auth/mfa/backup-codes", {
      password: alice.password,
    });
    assert.equal(noCode.json.error.code, "second_factor_required");
    const badCode = await alice2.request("POST", "/api/v1/auth/mfa/backup-codes", {
      password: alice.password,
      code: "999999",
    });
    assert.equal(badCode.json.error.code, "reauthentication_failed");
    const regen = await alice2.request("POST", "/api/v1/auth/mfa/backup-codes", {
      password: alice.password,
      backup_code: backup[1],
    });
    assert.equal(regen.status, 200, regen.text);
    assert.equal(regen.json.backup_codes.length, 10);
    token = await passwordStep(server, alice);
    assert.equal(
      (await secondStep(server, token, { backup_code: backup[2] }, OTHER_IP)).res.status,
      401,
      "old codes void",
    );
    const fresh = await secondStep(server, token, { backup_code: regen.json.backup_codes[0] }, OTHER_IP);
    assert.equal(fresh.res.status, 200, fresh.res.text);

    // Admin reset: needs every permission of the target, and ends the target's sessions.
    const bob = await server.loginAs({ username: "bob", permissions: ["user:edit", "user:view"] });
    const bobTry = await bob.request("POST", `/api/v1/users/${alice.user.id}/mfa/reset`, {
      password: bob.password,
    });
    assert.equal(bobTry.status, 403, bobTry.text);
    const admin = await server.loginAs({ username: "root2", superAdmin: true });
    const noProof = await admin.request("POST", `/api/v1/users/${alice.user.id}/mfa/reset`, {});
    assert.equal(noProof.json.error.code, "reauthentication_required");
    const reset = await admin.request("POST", `/api/v1/users/${alice.user.id}/mfa/reset`, {
      password: admin.password,
    });
    assert.equal(reset.status, 204, reset.text);
    assert.equal((await fresh.anon.request("GET", "/api/v1/auth/me")).status, 401, "alice's sessions ended");
    const oneStep = await server.anonymous().request("POST", "/api/v1/auth/login", {
      username: "alice",
      password: alice.password,
    });
    assert.equal(oneStep.json.user.username, "alice");
    const resetRows = await auditRows(server, "mfa.reset");
    assert.equal(resetRows.at(-1)?.outcome, "success");
    assert.deepEqual(resetRows.at(-1)?.details.removed, { totp: true, backup_codes: 9, webauthn: 0 });
  } finally {
    await server.close();
  }
});

dbTest(
  "TOTP survives a new session secret; seals under the former derived key are sealed again at start",
  async (db) => {
    const first = await createTestServer({ db, config: { security: { jwtSecret: JWT_SECRET } } });
    let dave: TestClient;
    let secret: string;
    let legacySealed: string;
    try {
      dave = await first.loginAs({ username: "dave" });
      ({ secret } = await enrol(dave));
      // As a server before the TOTP key sealed it: under the key derived from the session secret (v1).
      const v1 = await legacySeal(JWT_SECRET, dave.user.id, base32Decode(secret));
      await db.query("UPDATE user_totp SET secret_sealed = $1 WHERE user_id = $2", [v1, dave.user.id]);
      legacySealed = v1;
    } finally {
      await first.close();
    }

    // The next start (same session secret) seals it again under the TOTP key; the authenticator still works.
    const second = await createTestServer({ db, config: { security: { jwtSecret: JWT_SECRET } } });
    try {
      const [row] = await db.query<{ secret_sealed: string }>("SELECT secret_sealed FROM user_totp");
      assert.notEqual(row.secret_sealed, legacySealed);
      assert.match(row.secret_sealed, /^v2\./);
      assert.ok(second.logs.some((l) => /TOTP secrets sealed again under the TOTP key.*count=1/.test(l)));
      const token = await passwordStep(second, dave);
      const { res } = await secondStep(second, token, { code: await codeAt(secret, 1) });
      assert.equal(res.status, 200, res.text);
      // Each login below uses the current code again (a used step is refused, and the test cannot wait).
      await db.query("UPDATE user_totp SET last_used_step = NULL");
    } finally {
      await second.close();
    }

    // A new session secret (say after a leak), or none at all: the authenticator is unaffected.
    for (const jwtSecret of ["a-brand-new-session-secret-0123456789abcdef", ""]) {
      const rotated = await createTestServer({ db, config: { security: { jwtSecret } } });
      try {
        const token = await passwordStep(rotated, dave);
        const { res } = await secondStep(rotated, token, { code: await codeAt(secret) });
        assert.equal(res.status, 200, res.text);
        await db.query("UPDATE user_totp SET last_used_step = NULL");
        const erin = await rotated.loginAs({ username: `erin-${jwtSecret.length}` });
        const start = await erin.request("POST", "/api/v1/auth/mfa/totp", { password: erin.password });
        assert.equal(start.status, 200, "enrolment works without a configured session secret too");
      } finally {
        await rotated.close();
      }
    }

    // A v1 seal the current session secret does not open is left as it is, and the start says so.
    await db.query("UPDATE user_totp SET secret_sealed = $1 WHERE user_id = $2", [
      legacySealed,
      dave.user.id,
    ]);
    const other = await createTestServer({
      db,
      config: { security: { jwtSecret: "not-the-secret-it-was-sealed-under-0123" } },
    });
    try {
      const [row] = await db.query<{ secret_sealed: string }>(
        "SELECT secret_sealed FROM user_totp WHERE user_id = $1",
        [dave.user.id],
      );
      assert.equal(row.secret_sealed, legacySealed);
      assert.ok(other.logs.some((l) => /cannot be opened.*count=1/.test(l)), other.logs.join("\n"));
    } finally {
      await other.close();
    }
  },
);

/** A seal as servers made them before the TOTP key: AES-GCM under HKDF-SHA256 of the session secret. */
async function legacySeal(
  jwtSecret: string,
  userId: string,
  secret: Uint8Array<ArrayBuffer>,
): Promise<string> {
  const material = await crypto.subtle.importKey("raw", new TextEncoder().encode(jwtSecret), "HKDF", false, [
    "deriveKey",
  ]);
  const key = await crypto.subtle.deriveKey(
    {
      name: "HKDF",
      hash: "SHA-256",
      salt: new TextEncoder().encode("svc second factors"),
      info: new TextEncoder().encode("totp secret sealing v1"),
    },
    material,
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt"],
  );
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = new Uint8Array(
    await crypto.subtle.encrypt(
      { name: "AES-GCM", iv, additionalData: new TextEncoder().encode(userId) },
      key,
      secret,
    ),
  );
  const b64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));
  return `v1.${b64(iv)}.${b64(sealed)}`;
}

dbTest("MFA policy: covered users must enrol before anything else; step-up to change it", async (db) => {
  const server = await createTestServer({ db, config: { security: { jwtSecret: JWT_SECRET } } });
  try {
    const admin = await server.loginAs({ username: "boss", superAdmin: true });
    const dana = await server.loginAs({ username: "dana", permissions: ["settings:edit", "settings:view"] });
    const erin = await server.loginAs({ username: "erin", permissions: ["settings:view"] });

    const unknown = await admin.request("PUT", "/api/v1/settings/mfa", {
      mode: "permissions",
      permissions: ["settings:fly"],
      password: admin.password,
    });
    assert.equal(unknown.status, 400);
    assert.match(unknown.json.error.message, /settings:fly/);
    const noProof = await admin.request("PUT", "/api/v1/settings/mfa", { mode: "all" });
    assert.equal(noProof.json.error.code, "reauthentication_required");
    const set = await admin.request("PUT", "/api/v1/settings/mfa", {
      mode: "permissions",
      permissions: ["settings:edit"],
      password: admin.password,
    });
    assert.equal(set.status, 200, set.text);
    assert.equal(
      (await admin.request("GET", "/api/v1/settings/mfa")).json.error.code,
      "mfa_enrolment_required",
      "the super admin holds settings:edit too: covered",
    );
    assert.deepEqual((await erin.request("GET", "/api/v1/settings/mfa")).json, {
      mode: "permissions",
      permissions: ["settings:edit"],
      include_ldap: false,
    });

    // Dana holds settings:edit: everything but /auth/* is refused until she enrols.
    const blocked = await dana.request("GET", "/api/v1/settings/mfa");
    assert.equal(blocked.status, 403);
    assert.equal(blocked.json.error.code, "mfa_enrolment_required");
    assert.equal((await dana.request("GET", "/api/v1/auth/me")).status, 200);
    assert.equal((await dana.request("GET", "/api/v1/auth/mfa")).json.required, true);
    const danaMe = await dana.request("GET", "/api/v1/auth/me");
    assert.equal(danaMe.json.second_factor.enrolment_required, true, "the console shows the enrolment page");
    // Erin does not: not covered.
    assert.equal((await erin.request("GET", "/api/v1/settings/mfa")).status, 200);
    assert.equal((await erin.request("GET", "/api/v1/auth/mfa")).json.required, false);

    const danaCodes = (await enrol(dana)).backupCodes;
    assert.equal((await dana.request("GET", "/api/v1/settings/mfa")).status, 200, "enrolled: allowed");

    // Mode all covers Erin too. The admin is covered (blocked), so Dana changes it: enrolled, with her
    // second factor for the step-up.
    const all = await dana.request("PUT", "/api/v1/settings/mfa", { mode: "all", password: dana.password });
    assert.equal(all.json.error.code, "second_factor_required");
    const allOk = await dana.request("PUT", "/api/v1/settings/mfa", {
      mode: "all",
      password: dana.password,
      backup_code: danaCodes[0],
    });
    assert.equal(allOk.status, 200, allOk.text);
    assert.equal(
      (await erin.request("GET", "/api/v1/settings/mfa")).json.error.code,
      "mfa_enrolment_required",
    );
  } finally {
    await server.close();
  }
});

dbTest(
  "changing role bindings needs step-up: password, and the second factor when there is one",
  async (db) => {
    const server = await createTestServer({ db, config: { security: { jwtSecret: JWT_SECRET } } });
    try {
      const admin = await server.loginAs({ username: "chief", superAdmin: true });
      const frank = await server.loginAs({ username: "frank", permissions: [] });
      const [{ id: auditor }] = await db.query<{ id: string }>("SELECT id FROM roles WHERE name = 'Auditor'");
      const path = `/api/v1/users/${frank.user.id}/role-bindings`;
      const bare = await admin.request("POST", path, { role_id: auditor });
      assert.equal(bare.json.error.code, "reauthentication_required");
      const wrong = await admin.request("POST", path, { role_id: auditor, password: "not-the-password" });
      assert.equal(wrong.json.error.code, "reauthentication_failed");
      const auditorBindings = await db.query(
        "SELECT 1 FROM role_bindings WHERE user_id = $1 AND role_id = $2",
        [frank.user.id, auditor],
      );
      assert.equal(auditorBindings.length, 0, "refused calls bound nothing");

      const { backupCodes } = await enrol(admin);
      const noCode = await admin.request("POST", path, { role_id: auditor, password: admin.password });
      assert.equal(noCode.json.error.code, "second_factor_required");
      const made = await admin.request("POST", path, {
        role_id: auditor,
        password: admin.password,
        backup_code: backupCodes[0],
      });
      assert.equal(made.status, 201, made.text);
      const audit = await db.query<{ details: Record<string, unknown> }>(
        "SELECT details FROM audit_logs WHERE resource_type = 'role_binding' AND outcome = 'success'",
      );
      assert.ok(
        !JSON.stringify(audit).includes(backupCodes[0]),
        "the backup code is masked in the audit row",
      );
      assert.ok(!JSON.stringify(audit).includes(admin.password), "the password too");

      const remove = `${path}/${made.json.id}`;
      assert.equal((await admin.request("DELETE", remove)).json.error.code, "reauthentication_required");
      const removed = await admin.request("DELETE", remove, {
        password: admin.password,
        backup_code: backupCodes[1],
      });
      assert.equal(removed.status, 204, removed.text);
    } finally {
      await server.close();
    }
  },
);
