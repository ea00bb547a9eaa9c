/**
 * A throwaway MIT Kerberos realm for tests: krb5.conf and kdc.conf under a temporary directory, a database
 * made with kdb5_util, a service principal `HTTP/svc.example.test` and a machine principal
 * `host/pc1.example.test` with a keytab each, and krb5kdc on a free port. The GSSAPI library reads its
 * configuration from this process's environment, so the realm holds the environment lease
 * (./process_env.ts) until it stops.
 */
import { join } from "node:path";
import type { Gssapi } from "../../shared/pki/gssapi.ts";
import { mustRun } from "./command.ts";
import { leaseProcessEnv } from "./process_env.ts";
import { freePort } from "./process.ts";

const KDC_TOOLS = ["/usr/sbin/krb5kdc", "/usr/sbin/kdb5_util", "/usr/sbin/kadmin.local"];

/** Why a realm cannot be made on this machine, or undefined when it can. */
export const KDC_MISSING: string | undefined =
  (await Promise.all(KDC_TOOLS.map((path) => Deno.stat(path).then(() => true, () => false)))).every(Boolean)
    ? undefined
    : "an MIT KDC (apt-get install krb5-kdc krb5-admin-server)";

/** A running test realm. */
export interface TestRealm {
  /** `SVC.TEST`. */
  realm: string;
  /** The temporary directory holding the realm's files. */
  dir: string;
  /** Keytab of the service principal `HTTP/svc.example.test` (the server's side). */
  httpKeytab: string;
  /** Keytab of the machine principal `host/pc1.example.test` (the agent's side). */
  hostKeytab: string;
  /** Stops the KDC, gives the environment back and removes the directory. */
  stop(): Promise<void>;
}

/** Makes the realm and starts its KDC (which may take a moment to listen: see {@link initTokenWhenReady}). */
export async function startKdc(): Promise<TestRealm> {
  const realm = "SVC.TEST";
  const envLease = await leaseProcessEnv(["KRB5_CONFIG", "KRB5CCNAME", "KRB5RCACHEDIR", "KRB5_KTNAME"]);
  const dir = await Deno.makeTempDir({ prefix: "svc-krb5-" });
  let kdc: Deno.ChildProcess | undefined;
  const stop = async () => {
    if (kdc) {
      try {
        kdc.kill("SIGTERM");
      } catch { /* gone */ }
      await kdc.status;
    }
    envLease.release();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    const port = freePort();
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
    await mustRun("/usr/sbin/kdb5_util", ["create", "-s", "-r", realm, "-P", crypto.randomUUID()], { env });
    const kadmin = (query: string) => mustRun("/usr/sbin/kadmin.local", ["-r", realm, "-q", query], { env });
    const httpKeytab = join(dir, "http.keytab");
    const hostKeytab = join(dir, "host.keytab");
    await kadmin("addprinc -randkey HTTP/svc.example.test");
    await kadmin("addprinc -randkey host/pc1.example.test");
    await kadmin(`ktadd -k ${httpKeytab} HTTP/svc.example.test`);
    await kadmin(`ktadd -k ${hostKeytab} host/pc1.example.test`);
    kdc = new Deno.Command("/usr/sbin/krb5kdc", {
      args: ["-n", "-P", join(dir, "kdc.pid")],
      env,
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    // The library reads these when it first needs them, in this process.
    Deno.env.set("KRB5_CONFIG", join(dir, "krb5.conf"));
    Deno.env.set("KRB5CCNAME", `MEMORY:${crypto.randomUUID()}`);
    Deno.env.set("KRB5RCACHEDIR", dir);
    return { realm, dir, httpKeytab, hostKeytab, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A first SPNEGO token for `target`, retried for up to a minute while the new KDC starts to listen. */
export async function initTokenWhenReady(gss: Gssapi, target: string): Promise<Uint8Array> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      return gss.initToken(target);
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}
