/**
 * A throwaway OpenLDAP `slapd` for tests: a test CA and server certificate, an mdb database under a temp
 * dir, ldap:// and ldaps:// on 127.0.0.1, and a small directory (people, a twin uid, groups).
 */
import { opensslCertificate } from "./certificates.ts";
import { mustRun } from "./command.ts";
import { freePort } from "./process.ts";

export const SLAPD = "/usr/sbin/slapd";
export const haveSlapd = await Deno.stat(SLAPD).then(() => true, () => false) &&
  await Deno.stat("/usr/bin/ldapadd").then(() => true, () => false);

export const SUFFIX = "dc=example,dc=org";
export const ROOT_DN = `cn=admin,${SUFFIX}`;
export const ROOT_PW = "root-secret-for-tests";
export const READER_DN = `cn=reader,${SUFFIX}`;
export const READER_PW = "reader-secret-for-tests";

/** A running slapd. */
export interface Slapd {
  dir: string;
  ldapUrl: string;
  ldapsUrl: string;
  caFile: string;
  ldapadd(ldif: string): Promise<void>;
  ldapdelete(dn: string): Promise<void>;
  stop(): Promise<void>;
}

/** Starts slapd and waits until it answers. */
export async function startSlapd(): Promise<Slapd> {
  const dir = await Deno.makeTempDir({ prefix: "svc-slapd-" });
  await Deno.mkdir(`${dir}/db`);
  // A test CA and a server certificate for 127.0.0.1 and localhost.
  const ca = await opensslCertificate(dir, { name: "ca", subject: "/CN=svc slapd test CA", days: 2 });
  await opensslCertificate(dir, {
    name: "server",
    subject: "/CN=127.0.0.1",
    days: 2,
    extensions: ["subjectAltName=IP:127.0.0.1,DNS:localhost", "basicConstraints=critical,CA:FALSE"],
    issuer: ca,
  });
  await Deno.chmod(`${dir}/server.key`, 0o600);
  await Deno.writeTextFile(
    `${dir}/slapd.conf`,
    [
      "include /etc/ldap/schema/core.schema",
      "include /etc/ldap/schema/cosine.schema",
      "include /etc/ldap/schema/nis.schema",
      "include /etc/ldap/schema/inetorgperson.schema",
      "modulepath /usr/lib/ldap",
      "moduleload back_mdb",
      `pidfile ${dir}/slapd.pid`,
      `TLSCACertificateFile ${dir}/ca.crt`,
      `TLSCertificateFile ${dir}/server.crt`,
      `TLSCertificateKeyFile ${dir}/server.key`,
      "database mdb",
      `suffix "${SUFFIX}"`,
      `rootdn "${ROOT_DN}"`,
      `rootpw ${ROOT_PW}`,
      `directory ${dir}/db`,
      "maxsize 10485760",
      "access to attrs=userPassword by self read by anonymous auth by * none",
      "access to * by users read by * none",
      "",
    ].join("\n"),
  );
  const port = freePort();
  const tlsPort = freePort();
  const ldapUrl = `ldap://127.0.0.1:${port}`;
  const ldapsUrl = `ldaps://127.0.0.1:${tlsPort}`;
  const child = new Deno.Command(SLAPD, {
    args: ["-f", `${dir}/slapd.conf`, "-h", `${ldapUrl}/ ${ldapsUrl}/`, "-d", "0"],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const stderr = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let log = "";
  (async () => {
    for (;;) {
      const { value, done } = await stderr.read();
      if (done) break;
      log += value;
    }
  })();
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      await mustRun("ldapwhoami", ["-x", "-H", ldapUrl, "-D", ROOT_DN, "-w", ROOT_PW]);
      break;
    } catch (err) {
      if (Date.now() > deadline) {
        child.kill("SIGKILL");
        throw new Error(`slapd did not answer: ${err}\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const ldapadd = async (ldif: string) => {
    await mustRun("ldapadd", ["-x", "-H", ldapUrl, "-D", ROOT_DN, "-w", ROOT_PW], { stdin: ldif });
  };
  return {
    dir,
    ldapUrl,
    ldapsUrl,
    caFile: `${dir}/ca.crt`,
    ldapadd,
    async ldapdelete(dn) {
      await mustRun("ldapdelete", ["-x", "-H", ldapUrl, "-D", ROOT_DN, "-w", ROOT_PW, dn]);
    },
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

const person = (uid: string, ou: string, password: string, cn: string) => `
dn: uid=${uid},ou=${ou},${SUFFIX}
objectClass: inetOrgPerson
uid: ${uid}
cn: ${cn}
sn: ${cn.split(" ").at(-1)}
mail: ${uid}@example.org
userPassword: ${password}
`;

/** Entries the tests load: alice, bob, carol, two "twin", groups console-admins and helpdesk. */
export const DIRECTORY = `
dn: ${SUFFIX}
objectClass: dcObject
objectClass: organization
dc: example
o: Example

dn: ${READER_DN}
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: reader
userPassword: ${READER_PW}

dn: ou=people,${SUFFIX}
objectClass: organizationalUnit
ou: people

dn: ou=staff,${SUFFIX}
objectClass: organizationalUnit
ou: staff

dn: ou=groups,${SUFFIX}
objectClass: organizationalUnit
ou: groups
${person("alice", "people", "alice-directory-pass", "Alice Liddell")}
${person("bob", "people", "bob-directory-pass", "Bob Builder")}
${person("carol", "people", "carol-directory-pass", "Carol Directory")}
${person("twin", "people", "twin-pass-1", "Twin One")}
${person("twin", "staff", "twin-pass-2", "Twin Two")}
dn: cn=console-admins,ou=groups,${SUFFIX}
objectClass: groupOfNames
cn: console-admins
member: uid=alice,ou=people,${SUFFIX}

dn: cn=helpdesk,ou=groups,${SUFFIX}
objectClass: groupOfNames
cn: helpdesk
member: uid=bob,ou=people,${SUFFIX}
member: uid=carol,ou=people,${SUFFIX}
`;
