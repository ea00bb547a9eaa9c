/**
 * Test certificates made by the real openssl command: self-signed CAs (or not) with a chosen key, subject,
 * extensions and validity period (`openssl ca -selfsign`, which takes any start and end date), and server
 * certificates issued by one of them. Used by the Certificates tests of the shared reader, the agent and the
 * booted node.
 */

/** What {@link makeCertificate} makes. */
export interface CertOptions {
  /** `rsa:<bits>`, `ec:<curve>` (P-256, P-384, P-521) or `ed25519`; default `rsa:2048`. */
  key?: string;
  /** openssl `-subj` text; default `/CN=svc test CA`. */
  subject?: string;
  /** basicConstraints: `true` (CA), `false`, or `absent`; default true. */
  ca?: boolean | "absent";
  /** keyUsage value; default `critical,keyCertSign,cRLSign` for a CA, none otherwise. */
  keyUsage?: string;
  /** Validity; default from an hour ago for `days` (default 365) days. */
  notBefore?: Date;
  notAfter?: Date;
  days?: number;
}

/** A certificate and its key, as PEM text. */
export interface TestCert {
  pem: string;
  keyPem: string;
}

async function openssl(args: string[], cwd: string): Promise<string> {
  const out = await new Deno.Command("openssl", { args, cwd, stdout: "piped", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`openssl ${args.join(" ")} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
  return new TextDecoder().decode(out.stdout);
}

function opensslDate(date: Date): string {
  return date.toISOString().replace(/[-:T]/g, "").slice(0, 14) + "Z";
}

async function genKey(spec: string, cwd: string): Promise<void> {
  const [kind, param] = spec.split(":");
  const args = kind === "rsa"
    ? ["-algorithm", "RSA", "-pkeyopt", `rsa_keygen_bits:${param}`]
    : kind === "ec"
    ? ["-algorithm", "EC", "-pkeyopt", `ec_paramgen_curve:${param}`]
    : ["-algorithm", spec.toUpperCase()];
  await openssl(["genpkey", ...args, "-out", "key.pem"], cwd);
}

const CONFIG = (extensions: string) => `
[ca]
default_ca = test
[test]
dir = .
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = anything
unique_subject = no
copy_extensions = none
email_in_dn = yes
utf8 = yes
string_mask = utf8only
[anything]
countryName = optional
stateOrProvinceName = optional
localityName = optional
organizationName = optional
organizationalUnitName = optional
commonName = optional
emailAddress = optional
[req]
distinguished_name = dn
utf8 = yes
string_mask = utf8only
[dn]
[ext]
${extensions}
`;

/**
 * Runs `issue` in a fresh temporary directory (removed afterwards) and answers the `cert.pem` and `key.pem`
 * it leaves there.
 */
async function issuedIn(prefix: string, issue: (dir: string) => Promise<void>): Promise<TestCert> {
  const dir = await Deno.makeTempDir({ prefix });
  try {
    await issue(dir);
    return {
      pem: await Deno.readTextFile(`${dir}/cert.pem`),
      keyPem: await Deno.readTextFile(`${dir}/key.pem`),
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A self-signed certificate; see {@link CertOptions}. */
export async function makeCertificate(options: CertOptions = {}): Promise<TestCert> {
  return await issuedIn("svc-test-ca-", async (dir) => {
    await genKey(options.key ?? "rsa:2048", dir);
    const ca = options.ca ?? true;
    const ext = [
      "subjectKeyIdentifier = hash",
      ...(ca === "absent" ? [] : [`basicConstraints = critical,CA:${ca ? "TRUE" : "FALSE"}`]),
      ...(options.keyUsage ?? (ca === true ? "critical,keyCertSign,cRLSign" : "")
        ? [`keyUsage = ${options.keyUsage ?? "critical,keyCertSign,cRLSign"}`]
        : []),
    ].join("\n");
    await Deno.writeTextFile(`${dir}/openssl.cnf`, CONFIG(ext));
    await Deno.writeTextFile(`${dir}/index.txt`, "");
    await Deno.writeTextFile(`${dir}/serial`, `${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}\n`);
    const subject = options.subject ?? "/CN=svc test CA";
    await openssl(
      [
        "req",
        "-new",
        "-config",
        "openssl.cnf",
        "-key",
        "key.pem",
        "-subj",
        subject,
        "-utf8",
        "-out",
        "req.pem",
      ],
      dir,
    );
    const from = options.notBefore ?? new Date(Date.now() - 3600_000);
    const to = options.notAfter ?? new Date(from.getTime() + (options.days ?? 365) * 86400_000);
    await openssl([
      "ca",
      "-batch",
      "-selfsign",
      "-config",
      "openssl.cnf",
      "-keyfile",
      "key.pem",
      "-in",
      "req.pem",
      "-startdate",
      opensslDate(from),
      "-enddate",
      opensslDate(to),
      "-extensions",
      "ext",
      "-notext",
      "-utf8",
      "-out",
      "cert.pem",
    ], dir);
  });
}

/** A TLS server certificate for `names` (DNS names or IP addresses) issued by `ca`. */
export async function issueServerCertificate(ca: TestCert, names: readonly string[]): Promise<TestCert> {
  return await issuedIn("svc-test-leaf-", async (dir) => {
    await Deno.writeTextFile(`${dir}/ca.pem`, ca.pem);
    await Deno.writeTextFile(`${dir}/ca.key`, ca.keyPem);
    await genKey("ec:P-256", dir);
    const san = names.map((n) => /^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`).join(",");
    await Deno.writeTextFile(
      `${dir}/ext.cnf`,
      `subjectAltName=${san}\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n`,
    );
    await openssl(["req", "-new", "-key", "key.pem", "-subj", `/CN=${names[0]}`, "-out", "req.pem"], dir);
    await openssl([
      "x509",
      "-req",
      "-in",
      "req.pem",
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-days",
      "30",
      "-extfile",
      "ext.cnf",
      "-out",
      "cert.pem",
    ], dir);
  });
}
