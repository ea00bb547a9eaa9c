/**
 * The GSSAPI binding (shared/pki/gssapi.ts) against a real MIT KDC: a throwaway realm under a temporary
 * directory (kdb5_util, kadmin.local, krb5kdc on a free port, KRB5_CONFIG pointing at it), a machine keytab
 * for host/pc1.example.test and a service keytab for HTTP/svc.example.test. The machine's SPNEGO token is
 * accepted and names the machine principal; the same token replayed is refused; a token for a service the
 * realm does not know cannot be made; a missing library is reported with the package to install.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { leaseProcessEnv } from "../helpers/process_env.ts";
import { freePort } from "../helpers/process.ts";
import { GssError, openGssapi } from "../../shared/pki/gssapi.ts";

async function have(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}
const missing = !(await have("/usr/sbin/krb5kdc")) || !(await have("/usr/sbin/kdb5_util")) ||
  !(await have("/usr/sbin/kadmin.local"));
if (missing) {
  console.log("skipped: the Kerberos test needs an MIT KDC (apt-get install krb5-kdc krb5-admin-server)");
}

async function run(cmd: string, args: string[], env: Record<string, string>): Promise<void> {
  const out = await new Deno.Command(cmd, { args, env, stdin: "null", stdout: "piped", stderr: "piped" })
    .output();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")} failed:\n${new TextDecoder().decode(out.stderr)}`);
  }
}

Deno.test("GSSAPI: a missing library is named with its package", () => {
  assert.throws(() => openGssapi({ library: "libgssapi_missing.so.9" }), /libgssapi-krb5-2/);
});

Deno.test({
  name:
    "GSSAPI (real MIT KDC): machine token accepted with its principal, replay refused, unknown service refused",
  ignore: missing,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "svc-krb5-" });
    const envLease = await leaseProcessEnv(["KRB5_CONFIG", "KRB5CCNAME", "KRB5RCACHEDIR", "KRB5_KTNAME"]);
    let kdc: Deno.ChildProcess | undefined;
    try {
      const port = freePort();
      const realm = "SVC.TEST";
      await Deno.writeTextFile(
        join(dir, "krb5.conf"),
        [
          "[libdefaults]",
          `  default_realm = ${realm}`,
          "  dns_lookup_kdc = false",
          "  dns_lookup_realm = false",
          "  rdns = false",
          "  udp_preference_limit = 1",
          "[realms]",
          `  ${realm} = {`,
          `    kdc = 127.0.0.1:${port}`,
          "  }",
          "",
        ].join("\n"),
      );
      await Deno.writeTextFile(
        join(dir, "kdc.conf"),
        [
          "[kdcdefaults]",
          `  kdc_listen = 127.0.0.1:${port}`,
          `  kdc_tcp_listen = 127.0.0.1:${port}`,
          "[realms]",
          `  ${realm} = {`,
          `    database_name = ${join(dir, "principal")}`,
          `    key_stash_file = ${join(dir, "stash")}`,
          `    acl_file = ${join(dir, "kadm5.acl")}`,
          "  }",
          "",
        ].join("\n"),
      );
      const env = { KRB5_CONFIG: join(dir, "krb5.conf"), KRB5_KDC_PROFILE: join(dir, "kdc.conf") };
      await run("/usr/sbin/kdb5_util", ["create", "-s", "-r", realm, "-P", crypto.randomUUID()], env);
      const kadmin = (query: string) => run("/usr/sbin/kadmin.local", ["-r", realm, "-q", query], env);
      await kadmin("addprinc -randkey HTTP/svc.example.test");
      await kadmin("addprinc -randkey host/pc1.example.test");
      await kadmin(`ktadd -k ${join(dir, "http.keytab")} HTTP/svc.example.test`);
      await kadmin(`ktadd -k ${join(dir, "host.keytab")} host/pc1.example.test`);
      kdc = new Deno.Command("/usr/sbin/krb5kdc", {
        args: ["-n", "-P", join(dir, "kdc.pid")],
        env,
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn();
      // The library reads these when it first needs them, in this process.
      Deno.env.set("KRB5_CONFIG", join(dir, "krb5.conf"));
      Deno.env.set("KRB5CCNAME", "MEMORY:svc-test");
      Deno.env.set("KRB5RCACHEDIR", dir);
      const gss = openGssapi({
        acceptorKeytab: join(dir, "http.keytab"),
        clientKeytab: join(dir, "host.keytab"),
      });
      try {
        // The KDC may take a moment to listen.
        const deadline = Date.now() + 60_000;
        let token: Uint8Array | undefined;
        while (!token) {
          try {
            token = gss.initToken("HTTP@svc.example.test");
          } catch (err) {
            if (Date.now() > deadline) throw err;
            await new Promise((r) => setTimeout(r, 200));
          }
        }
        assert.ok(token.length > 100, "a SPNEGO token");
        assert.equal(gss.acceptToken(token), `host/pc1.example.test@${realm}`);
        assert.throws(() => gss.acceptToken(token), GssError, "the same token again is a replay");
        assert.throws(() => gss.initToken("HTTP@nosuch.example.test"), /not found|unknown/i);
        assert.throws(() => gss.acceptToken(new Uint8Array([0x60, 0x03, 0x06, 0x01, 0x00])), GssError);
      } finally {
        gss.close();
      }
    } finally {
      if (kdc) {
        try {
          kdc.kill("SIGTERM");
        } catch { /* gone */ }
        await kdc.status;
      }
      envLease.release();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
