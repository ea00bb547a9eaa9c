/**
 * LDAP directory login against a real OpenLDAP `slapd` (Debian package) started on 127.0.0.1 with a
 * throwaway mdb database and a test CA, over ldaps:// and ldap:// with StartTLS: users created and synced
 * with `source: ldap`, groups mapped to svc user groups, the password never stored, every failure kind
 * (wrong password, not found, ambiguous, bad service bind, unreachable, a local user of the same name), a
 * filter-injection username refused, and a user removed from the directory disabled in svc.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer } from "../helpers/app.ts";
import { mustRun } from "../helpers/command.ts";
import { freePort } from "../helpers/process.ts";
import {
  DIRECTORY,
  haveSlapd,
  READER_DN,
  READER_PW,
  ROOT_DN,
  ROOT_PW,
  startSlapd,
  SUFFIX,
} from "../helpers/slapd.ts";
import { escapeFilterValue, fillFilter } from "../../server/auth/ldap.ts";
import { createUser } from "../../server/auth/users.ts";
import { createUserGroup } from "../../server/auth/user_groups.ts";
import { collectDatabaseFamilies } from "../../server/metrics/collector.ts";

if (!haveSlapd) {
  console.warn("LDAP tests skipped: need slapd and ldap-utils (apt-get install slapd ldap-utils)");
}

Deno.test("RFC 4515 escaping of filter values", () => {
  assert.equal(escapeFilterValue("*)(uid=*"), "\\2a\\29\\28uid=\\2a");
  assert.equal(escapeFilterValue("a\\b\0"), "a\\5cb\\00");
  assert.equal(escapeFilterValue("é"), "\\c3\\a9");
  assert.equal(fillFilter("(&(uid={username})(x={other}))", { username: "a*" }), "(&(uid=a\\2a)(x={other}))");
});

dbTest("LDAP login through REST against a real slapd", async (db) => {
  const slapd = await startSlapd();
  const ldapConfig = {
    url: slapd.ldapsUrl,
    caFile: slapd.caFile,
    bindDn: READER_DN,
    bindPassword: READER_PW,
    userBase: SUFFIX,
    groupBase: `ou=groups,${SUFFIX}`,
    groupMap: ["console-admins=>Admins", `cn=helpdesk,ou=groups,${SUFFIX}=>Helpdesk`],
  };
  const server = await createTestServer({
    db,
    config: { ldap: ldapConfig, security: { jwtSecret: "ldap-test-jwt-secret-0123456789abcdef" } },
  });
  try {
    await slapd.ldapadd(DIRECTORY);
    await createUserGroup(db, { name: "Admins" });
    await createUserGroup(db, { name: "Helpdesk" });
    await createUser(db, { username: "carol", password: "carol-local-password-1" });
    const login = (username: string, password: string, ip = "10.9.0.1") =>
      server.anonymous({ ip }).request("POST", "/api/v1/auth/login", { username, password });

    const alice = await login("alice", "alice-directory-pass");
    assert.equal(
      alice.status,
      200,
      `${alice.text}\n${server.logs.filter((l) => l.includes("ldap")).join("\n")}`,
    );
    assert.equal(alice.json.user.source, "ldap");
    assert.equal(alice.json.user.full_name, "Alice Liddell");
    assert.equal(alice.json.user.email, "alice@example.org");
    assert.equal(alice.json.features.ldap, true);
    const [row] = await db.query<{ password_hash: string; source: string }>(
      "SELECT password_hash, source FROM users WHERE username = 'alice'",
    );
    assert.deepEqual(row, { password_hash: "", source: "ldap" }, "the password is never stored");
    const groupsOf = async (u: string) =>
      (await db.query<{ name: string }>(
        `SELECT g.name FROM user_groups g JOIN user_group_members m ON m.user_group_id = g.id
          JOIN users u ON u.id = m.user_id WHERE u.username = $1 ORDER BY 1`,
        [u],
      )).map((r) => r.name);
    assert.deepEqual(await groupsOf("alice"), ["Admins"], "mapped by group name");
    assert.equal((await login("bob", "bob-directory-pass")).status, 200);
    assert.deepEqual(await groupsOf("bob"), ["Helpdesk"], "mapped by group DN");

    // Synced at each login: bob leaves helpdesk, joins console-admins.
    await mustRun(
      "ldapmodify",
      ["-x", "-H", slapd.ldapUrl, "-D", ROOT_DN, "-w", ROOT_PW],
      {
        stdin: `
dn: cn=helpdesk,ou=groups,${SUFFIX}
changetype: modify
delete: member
member: uid=bob,ou=people,${SUFFIX}

dn: cn=console-admins,ou=groups,${SUFFIX}
changetype: modify
add: member
member: uid=bob,ou=people,${SUFFIX}
`,
      },
    );
    assert.equal((await login("bob", "bob-directory-pass")).status, 200);
    assert.deepEqual(await groupsOf("bob"), ["Admins"]);

    const reasons = async () =>
      (await db.query<{ reason: string }>(
        "SELECT details->>'reason' AS reason FROM audit_logs WHERE action = 'auth.login' AND outcome = 'failure' ORDER BY created_at",
      )).map((r) => r.reason);
    const wrong = await login("alice", "not-her-password");
    assert.equal(wrong.status, 401);
    assert.equal(wrong.json.error.code, "invalid_credentials");
    const unknown = await login("nobody", "whatever-password");
    assert.equal(unknown.status, 401);
    assert.deepEqual(unknown.json, wrong.json, "the same answer for an unknown user and a wrong password");
    const twin = await login("twin", "twin-pass-1");
    assert.equal(twin.status, 401);
    assert.ok(server.logs.some((l) => l.includes("entries match")), "ambiguous user named in the log");
    // A local user of the same name keeps their local password; the directory's is refused.
    assert.equal((await login("carol", "carol-directory-pass")).status, 401);
    assert.equal((await login("carol", "carol-local-password-1")).json.user.source, "local");
    // Filter injection: refused before any search, and nothing matches by wildcard.
    for (const evil of ["*", "alice)(uid=*", "a*", "*)(|(uid=*"]) {
      const res = await login(evil, "alice-directory-pass");
      assert.equal(res.status, 401, `${evil} logged in`);
    }
    assert.deepEqual((await reasons()).slice(0, 4), [
      "ldap_wrong_password",
      "ldap_not_found",
      "ldap_ambiguous",
      "wrong_password",
    ]);
    const [{ n: ldapUsers }] = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM users WHERE source = 'ldap'",
    );
    assert.equal(ldapUsers, 2, "only alice and bob were created");

    // Step-up re-authentication of a directory user asks the directory.
    const stepping = server.anonymous({ ip: "10.9.0.3" });
    assert.equal(
      (await stepping.request("POST", "/api/v1/auth/login", {
        username: "alice",
        password: "alice-directory-pass",
      })).status,
      200,
    );
    const badStep = await stepping.request("POST", "/api/v1/auth/mfa/totp", { password: "not-her-password" });
    assert.equal(badStep.json.error.code, "reauthentication_failed");
    const goodStep = await stepping.request("POST", "/api/v1/auth/mfa/totp", {
      password: "alice-directory-pass",
    });
    assert.equal(goodStep.status, 200, goodStep.text);

    // Removed from the directory: disabled in svc, sessions ended.
    const session = server.anonymous({ ip: "10.9.0.2" });
    assert.equal(
      (await session.request("POST", "/api/v1/auth/login", {
        username: "alice",
        password: "alice-directory-pass",
      })).status,
      200,
    );
    await slapd.ldapdelete(`uid=alice,ou=people,${SUFFIX}`);
    assert.equal((await login("alice", "alice-directory-pass")).status, 401);
    const [{ enabled }] = await db.query<{ enabled: boolean }>(
      "SELECT enabled FROM users WHERE username = 'alice'",
    );
    assert.equal(enabled, false);
    assert.equal((await session.request("GET", "/api/v1/auth/me")).status, 401);

    // svc_users_total counts directory users by source and enabled flag.
    const families = await collectDatabaseFamilies(db, server.ctx.log);
    const users = families.find((f) => f.name === "svc_users_total")!;
    const count = (source: string, on: boolean) =>
      users.samples.find((x) => x.labels.source === source && x.labels.enabled === String(on))?.value;
    assert.equal(count("ldap", true), 1, "bob");
    assert.equal(count("ldap", false), 1, "alice, gone from the directory");
  } finally {
    await server.close();
    await slapd.stop();
  }
}, { ignore: !haveSlapd, sanitizeResources: false, sanitizeOps: false });

dbTest(
  "LDAP: each failure of the directory itself is a 503 for the person and a fix in the log",
  async (db) => {
    const slapd = await startSlapd();
    const base = {
      caFile: slapd.caFile,
      bindDn: READER_DN,
      bindPassword: READER_PW,
      userBase: SUFFIX,
    };
    const servers = [];
    try {
      await slapd.ldapadd(DIRECTORY);
      const ldaps = await createTestServer({ db, config: { ldap: { ...base, url: slapd.ldapsUrl } } });
      servers.push(ldaps);
      const ok = await ldaps.anonymous().request("POST", "/api/v1/auth/login", {
        username: "bob",
        password: "bob-directory-pass",
      });
      assert.equal(ok.status, 200, ok.text);

      const badBind = await createTestServer({
        db,
        config: { ldap: { ...base, url: slapd.ldapsUrl, bindPassword: "wrong" } },
      });
      servers.push(badBind);
      const r1 = await badBind.anonymous().request("POST", "/api/v1/auth/login", {
        username: "bob",
        password: "bob-directory-pass",
      });
      assert.equal(r1.status, 503);
      assert.equal(r1.json.error.code, "directory_unavailable");
      assert.ok(badBind.logs.some((l) => l.includes("ldap.bind_password")), "the log names the key to fix");

      const wrongCa = await createTestServer({
        db,
        config: { ldap: { ...base, url: slapd.ldapsUrl, caFile: "/etc/ssl/certs/ca-certificates.crt" } },
      });
      servers.push(wrongCa);
      const r2 = await wrongCa.anonymous().request("POST", "/api/v1/auth/login", {
        username: "bob",
        password: "bob-directory-pass",
      });
      assert.equal(r2.status, 503, "a certificate that does not chain to ldap.ca_file is refused");

      // ldap:// upgraded with StartTLS, verified against the test CA.
      const startTls = await createTestServer({ db, config: { ldap: { ...base, url: slapd.ldapUrl } } });
      servers.push(startTls);
      const r4 = await startTls.anonymous().request("POST", "/api/v1/auth/login", {
        username: "bob",
        password: "bob-directory-pass",
      });
      assert.equal(r4.status, 200, startTls.logs.filter((l) => l.includes("ldap")).join("\n"));
      const startTlsWrongCa = await createTestServer({
        db,
        config: { ldap: { ...base, url: slapd.ldapUrl, caFile: "/etc/ssl/certs/ca-certificates.crt" } },
      });
      servers.push(startTlsWrongCa);
      const r4b = await startTlsWrongCa.anonymous().request("POST", "/api/v1/auth/login", {
        username: "bob",
        password: "bob-directory-pass",
      });
      assert.equal(r4b.status, 503, "StartTLS to a certificate outside ldap.ca_file is refused");
      // Clear text only to a loopback directory; anywhere else it is refused before connecting.
      const plainLoopback = await createTestServer({
        db,
        config: { ldap: { ...base, url: slapd.ldapUrl, startTls: false } },
      });
      servers.push(plainLoopback);
      const r5 = await plainLoopback.anonymous().request("POST", "/api/v1/auth/login", {
        username: "bob",
        password: "bob-directory-pass",
      });
      assert.equal(r5.status, 200, plainLoopback.logs.filter((l) => l.includes("ldap")).join("\n"));
      const plainRemote = await createTestServer({
        db,
        config: { ldap: { ...base, url: "ldap://directory.example.test", startTls: false } },
      });
      servers.push(plainRemote);
      const r6 = await plainRemote.anonymous().request("POST", "/api/v1/auth/login", {
        username: "bob",
        password: "bob-directory-pass",
      });
      assert.equal(r6.status, 503);
      assert.ok(plainRemote.logs.some((l) => l.includes("clear text")));

      const closed = await createTestServer({
        db,
        config: { ldap: { ...base, url: `ldap://127.0.0.1:${freePort()}`, timeoutSeconds: 5 } },
      });
      servers.push(closed);
      const r3 = await closed.anonymous().request("POST", "/api/v1/auth/login", {
        username: "bob",
        password: "bob-directory-pass",
      });
      assert.equal(r3.status, 503);
      assert.ok(closed.logs.some((l) => l.includes("cannot use the directory")));
    } finally {
      for (const s of servers) await s.close();
      await slapd.stop();
    }
  },
  { ignore: !haveSlapd, sanitizeResources: false, sanitizeOps: false },
);
