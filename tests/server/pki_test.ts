import assert from "node:assert/strict";
import { join } from "node:path";
import {
  type Ca,
  ensureInternalServerCert,
  loadOrCreateCa,
  loadOrCreateServerCert,
  PkiError,
  signCsr,
} from "../../server/pki/mod.ts";
import {
  decodeCertificate,
  formatSerial,
  generateKeyAndCsr,
  parseCertificate,
  toPem,
  x509,
} from "../../shared/pki/csr.ts";
import {
  INTERMEDIATE_CA_EXTENSIONS,
  opensslCertificate,
  ROOT_CA_EXTENSIONS,
} from "../helpers/certificates.ts";
import { mustRun, runCommand } from "../helpers/command.ts";

const DAY_MS = 86_400_000;

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "svc-pki-test-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function openssl(...args: string[]): Promise<string> {
  return (await mustRun("openssl", args)).output;
}

async function opensslVerify(caPem: string, certPem: string, purpose: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "svc-pki-verify-" });
  try {
    await Deno.writeTextFile(join(dir, "ca.crt"), caPem);
    await Deno.writeTextFile(join(dir, "cert.pem"), certPem);
    return await openssl(
      "verify",
      "-purpose",
      purpose,
      "-CAfile",
      join(dir, "ca.crt"),
      join(dir, "cert.pem"),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function csrWith(params: {
  algorithm: EcKeyGenParams | RsaHashedKeyGenParams | Algorithm;
  signing: Algorithm | EcdsaParams;
  name?: string;
  extensions?: InstanceType<typeof x509.Extension>[];
}): Promise<string> {
  const keys = await crypto.subtle.generateKey(params.algorithm, true, ["sign", "verify"]) as CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: params.name ?? "CN=node",
    keys,
    signingAlgorithm: params.signing,
    extensions: params.extensions,
  });
  return toPem(csr.rawData, "CERTIFICATE REQUEST");
}

async function rejects(promise: Promise<unknown>, message: string | RegExp): Promise<void> {
  await assert.rejects(promise, (err: Error) => {
    assert.ok(err instanceof PkiError, `expected PkiError, got ${err.name}: ${err.message}`);
    if (typeof message === "string") assert.equal(err.message, message);
    else assert.match(err.message, message);
    return true;
  });
}

let sharedCa: Promise<Ca> | undefined;

/** One CA for the tests that only sign, created once to keep the file fast; its files are not needed. */
function testCa(): Promise<Ca> {
  sharedCa ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "svc-pki-ca-" });
    try {
      return await loadOrCreateCa({ dataDir: dir });
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  })();
  return sharedCa;
}

Deno.test("CA is created with private permissions and reloaded identically", async () => {
  await withTempDir(async (dataDir) => {
    const first = await loadOrCreateCa({ dataDir });
    assert.equal(first.generated, true);

    const caDir = join(dataDir, "pki", "ca");
    assert.equal((await Deno.stat(caDir)).mode! & 0o777, 0o700);
    assert.equal((await Deno.stat(join(caDir, "ca.key"))).mode! & 0o777, 0o600);
    const onDisk = await Deno.readTextFile(join(caDir, "ca.crt"));
    assert.equal(onDisk, first.certPem);
    assert.match(await Deno.readTextFile(join(caDir, "ca.key")), /^-----BEGIN PRIVATE KEY-----\n/);
    assert.deepEqual(
      (await Array.fromAsync(Deno.readDir(join(dataDir, "pki")))).map((e) => e.name),
      ["ca"],
      "the staging directory is gone",
    );

    const cert = first.cert;
    assert.equal(cert.subject, "O=svc, CN=svc Internal CA");
    assert.equal(cert.issuer, cert.subject);
    assert.deepEqual(first.privateKey.algorithm, { name: "ECDSA", namedCurve: "P-256" }, "P-256 by default");
    assert.equal(first.privateKey.extractable, false);
    const basic = cert.getExtension(x509.BasicConstraintsExtension)!;
    assert.deepEqual([basic.ca, basic.pathLength, basic.critical], [true, 0, true]);
    const usage = cert.getExtension(x509.KeyUsagesExtension)!;
    assert.equal(usage.usages, x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign);
    assert.equal(usage.critical, true);
    assert.ok(cert.getExtension(x509.SubjectKeyIdentifierExtension));
    const years = (cert.notAfter.getTime() - Date.now()) / (365.25 * DAY_MS);
    assert.ok(years > 9.9 && years < 10.1, `validity ${years} years`);
    assert.match(formatSerial(cert.serialNumber), /^[0-9a-f]{25,32}$/);
    assert.ok(await cert.isSelfSigned());

    const second = await loadOrCreateCa({ dataDir });
    assert.equal(second.generated, false);
    assert.equal(second.certPem, first.certPem);
    assert.equal(second.cert.serialNumber, first.cert.serialNumber);

    const text = await openssl("x509", "-in", join(caDir, "ca.crt"), "-noout", "-text");
    assert.match(text, /CA:TRUE, pathlen:0/);
    assert.match(text, /Certificate Sign, CRL Sign/);
  });
});

Deno.test("ca.key_type P-384 creates a P-384 CA signing with SHA-384; an existing CA keeps its curve", async () => {
  await withTempDir(async (dataDir) => {
    const created = await loadOrCreateCa({ dataDir, keyType: "P-384" });
    assert.deepEqual(created.privateKey.algorithm, { name: "ECDSA", namedCurve: "P-384" });
    const { csrPem } = await generateKeyAndCsr("node-1");
    const signed = await created.signCsr(csrPem, { commonName: "node-1" });
    await Deno.writeTextFile(join(dataDir, "agent.crt"), signed.certPem);
    const text = await openssl("x509", "-noout", "-text", "-in", join(dataDir, "agent.crt"));
    assert.match(text, /Signature Algorithm: ecdsa-with-SHA384/);
    assert.match(await opensslVerify(created.certPem, signed.certPem, "sslclient"), /OK/);
    const reloaded = await loadOrCreateCa({ dataDir, keyType: "P-256" });
    assert.equal(reloaded.generated, false);
    assert.deepEqual(reloaded.privateKey.algorithm, { name: "ECDSA", namedCurve: "P-384" });
  });
});

Deno.test("CA directory holding only one of the two files is refused", async () => {
  await withTempDir(async (dataDir) => {
    await loadOrCreateCa({ dataDir });
    await Deno.remove(join(dataDir, "pki", "ca", "ca.key"));
    await assert.rejects(loadOrCreateCa({ dataDir }), /ca\.crt exists but .*ca\.key is missing/);
  });
});

Deno.test("signCsr forces the subject to the node name and drops requested extensions", async () => {
  const ca = await testCa();
  const csrPem = await csrWith({
    algorithm: { name: "ECDSA", namedCurve: "P-256" },
    signing: { name: "ECDSA", hash: "SHA-256" },
    name: "CN=evil, O=x",
    extensions: [
      new x509.SubjectAlternativeNameExtension([{ type: "dns", value: "evil.example" }]),
      new x509.BasicConstraintsExtension(true, undefined, true),
    ],
  });
  const now = new Date();
  const signed = await ca.signCsr(csrPem, { commonName: "node-1", now });
  const cert = decodeCertificate(signed.certPem);

  assert.equal(cert.subject, "CN=node-1");
  assert.equal(cert.issuer, ca.cert.subject);
  assert.equal(cert.getExtension(x509.SubjectAlternativeNameExtension), null);
  assert.equal(cert.getExtension(x509.BasicConstraintsExtension)?.ca, false);
  assert.deepEqual([...cert.getExtension(x509.ExtendedKeyUsageExtension)!.usages], [
    x509.ExtendedKeyUsage.clientAuth,
  ]);
  const usage = cert.getExtension(x509.KeyUsagesExtension)!;
  assert.equal(usage.usages, x509.KeyUsageFlags.digitalSignature);
  assert.equal(usage.critical, true);
  assert.equal(
    cert.getExtension(x509.AuthorityKeyIdentifierExtension)?.keyId,
    ca.cert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId,
  );

  assert.equal(signed.notBefore.getTime(), Math.floor((now.getTime() - 60_000) / 1000) * 1000);
  assert.equal(signed.notAfter.getTime(), Math.floor((now.getTime() + 90 * DAY_MS) / 1000) * 1000);
  const info = parseCertificate(signed.certPem);
  assert.deepEqual(info, {
    serial: signed.serial,
    commonName: "node-1",
    notBefore: signed.notBefore,
    notAfter: signed.notAfter,
    issuer: "O=svc, CN=svc Internal CA",
  });
  assert.match(signed.serial, /^[1-9a-f][0-9a-f]*$/);

  const opensslSerial = await runCommand("sh", [
    "-c",
    `printf '%s' "$0" | openssl x509 -noout -serial`,
    signed.certPem,
  ]);
  assert.equal(formatSerial(opensslSerial.output), signed.serial);
});

Deno.test("signCsr honours validityDays and issues distinct serials", async () => {
  const ca = await testCa();
  const { csrPem } = await generateKeyAndCsr("node-2");
  const a = await signCsr(ca, csrPem, { commonName: "node-2", validityDays: 7 });
  const b = await signCsr(ca, csrPem, { commonName: "node-2" });
  const days = (a.notAfter.getTime() - a.notBefore.getTime()) / DAY_MS;
  assert.ok(Math.abs(days - 7) < 0.01, `validity ${days} days`);
  assert.notEqual(a.serial, b.serial);
});

Deno.test("issued agent certificate verifies with openssl against the CA", async () => {
  const ca = await testCa();
  const { csrPem } = await generateKeyAndCsr("node-1");
  const signed = await ca.signCsr(csrPem, { commonName: "node-1" });
  const output = await opensslVerify(ca.certPem, signed.certPem, "sslclient");
  assert.match(output, /cert\.pem: OK/);
});

Deno.test("generateKeyAndCsr produces a P-256 PKCS#8 key and a CSR openssl accepts", async () => {
  const { keyPem, csrPem } = await generateKeyAndCsr("node-7");
  assert.match(keyPem, /^-----BEGIN PRIVATE KEY-----\n[\s\S]+-----END PRIVATE KEY-----\n$/);
  const dir = await Deno.makeTempDir({ prefix: "svc-pki-csr-" });
  try {
    await Deno.writeTextFile(join(dir, "req.pem"), csrPem);
    await Deno.writeTextFile(join(dir, "key.pem"), keyPem);
    const req = await openssl("req", "-in", join(dir, "req.pem"), "-noout", "-verify", "-subject");
    assert.match(req, /subject=CN\s?=\s?node-7/);
    assert.match(await openssl("pkey", "-in", join(dir, "key.pem"), "-noout", "-text"), /NIST CURVE: P-256/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("signCsr signs openssl-made ECDSA P-256 requests (SHA-256 and SHA-384 signatures)", async () => {
  const ca = await testCa();
  for (const digest of ["-sha256", "-sha384"]) {
    const csrPem = await openssl(
      ...["req", "-new", digest, "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"],
      ...["-keyout", "/dev/null", "-subj", "/CN=whatever/O=other"],
    );
    const signed = await ca.signCsr(csrPem, { commonName: "node-x" });
    assert.equal(decodeCertificate(signed.certPem).subject, "CN=node-x", digest);
    assert.match(await opensslVerify(ca.certPem, signed.certPem, "sslclient"), /OK/, digest);
  }
});

Deno.test("signCsr refuses P-384, P-521 and Ed25519 keys, naming the key and the one required", async () => {
  const ca = await testCa();
  const cases: [string, RegExp][] = [
    [
      await csrWith({
        algorithm: { name: "ECDSA", namedCurve: "P-384" },
        signing: { name: "ECDSA", hash: "SHA-384" },
      }),
      /uses an ECDSA P-384 key; agent certificates need an ECDSA P-256 key/,
    ],
    [
      await csrWith({
        algorithm: { name: "ECDSA", namedCurve: "P-521" },
        signing: { name: "ECDSA", hash: "SHA-512" },
      }),
      /uses an ECDSA P-521 key; agent certificates need an ECDSA P-256 key/,
    ],
    [
      await csrWith({ algorithm: { name: "Ed25519" }, signing: { name: "Ed25519" } }),
      /uses an Ed25519 key; agent certificates need an ECDSA P-256 key/,
    ],
  ];
  for (const [csrPem, message] of cases) await rejects(ca.signCsr(csrPem, { commonName: "node-x" }), message);
});

Deno.test("signCsr rejects RSA keys", async () => {
  const ca = await testCa();
  const webCryptoRsa = await csrWith({
    algorithm: {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    },
    signing: { name: "RSASSA-PKCS1-v1_5" },
  });
  const opensslRsa = await openssl(
    "req",
    "-new",
    "-newkey",
    "rsa:3072",
    "-nodes",
    "-keyout",
    "/dev/null",
    "-subj",
    "/CN=node-1",
  );
  for (const csrPem of [webCryptoRsa, opensslRsa]) {
    await rejects(
      ca.signCsr(csrPem, { commonName: "node-1" }),
      /^the certificate request uses an RSA (2048|3072)-bit key; agent certificates need an ECDSA P-256 key/,
    );
  }
});

Deno.test("signCsr rejects a request whose signature was tampered with", async () => {
  const ca = await testCa();
  const { csrPem } = await generateKeyAndCsr("node-1");
  const der = new Uint8Array(x509.PemConverter.decodeFirst(csrPem));
  // The signature is the last element of the request, so the last byte is part of it.
  der[der.length - 1] ^= 0x01;
  await rejects(
    ca.signCsr(toPem(der, "CERTIFICATE REQUEST"), { commonName: "node-1" }),
    "certificate request signature is invalid",
  );
});

Deno.test("signCsr rejects PEM that is not a certificate request", async () => {
  const ca = await testCa();
  const { keyPem } = await generateKeyAndCsr("node-1");
  for (const notCsr of [ca.certPem, keyPem, "", "hello", "-----BEGIN CERTIFICATE REQUEST-----\n!!\n"]) {
    await rejects(ca.signCsr(notCsr, { commonName: "node-1" }), /^csr_pem is not a PEM certificate request/);
  }
  const garbage = toPem(new Uint8Array([0x30, 0x03, 0x02, 0x01, 0x00]), "CERTIFICATE REQUEST");
  await rejects(ca.signCsr(garbage, { commonName: "node-1" }), /^csr_pem is not a PEM certificate request/);
});

Deno.test("signCsr rejects invalid common names", async () => {
  const ca = await testCa();
  const { csrPem } = await generateKeyAndCsr("node-1");
  for (const name of ["", "-node", ".node", "node 1", "node/1", "nöde", "a".repeat(254), "CN=x,O=y"]) {
    await rejects(ca.signCsr(csrPem, { commonName: name }), /^common name .* is invalid/);
  }
  const longest = "a".repeat(253);
  assert.equal(
    parseCertificate((await ca.signCsr(csrPem, { commonName: longest })).certPem).commonName,
    longest,
  );
});

Deno.test("formatSerial gives one spelling for every source", () => {
  assert.equal(formatSerial("00:8A:BC"), "8abc");
  assert.equal(formatSerial("serial=0A0B\n"), "a0b");
  assert.equal(formatSerial(new Uint8Array([0, 0x8a, 0xbc])), "8abc");
  assert.equal(formatSerial("00"), "0");
  assert.throws(() => formatSerial("xyz"), /not hexadecimal/);
});

Deno.test("internal server certificate covers the required names and chains to the CA", async () => {
  const ca = await testCa();
  await withTempDir(async (dataDir) => {
    const hostnames = ["svc.example.com", "10.1.2.3", "2001:db8::5"];
    const result = await loadOrCreateServerCert(ca, { dataDir, hostnames });
    assert.equal(result.generated, true);

    const serverDir = join(dataDir, "pki", "server");
    assert.equal((await Deno.stat(join(serverDir, "server.key"))).mode! & 0o777, 0o600);
    assert.equal(await Deno.readTextFile(join(serverDir, "server.crt")), result.certPem);
    assert.equal(await Deno.readTextFile(join(serverDir, "server.key")), result.keyPem);

    const cert = decodeCertificate(result.certPem);
    assert.equal(cert.subject, "CN=svc server");
    assert.deepEqual(cert.publicKey.algorithm, { name: "ECDSA", namedCurve: "P-256" });
    const days = (cert.notAfter.getTime() - Date.now()) / DAY_MS;
    assert.ok(days > 364 && days < 366, `validity ${days} days`);
    assert.deepEqual([...cert.getExtension(x509.ExtendedKeyUsageExtension)!.usages], [
      x509.ExtendedKeyUsage.serverAuth,
    ]);
    assert.equal(cert.getExtension(x509.KeyUsagesExtension)?.usages, x509.KeyUsageFlags.digitalSignature);

    const sans = await openssl(
      "x509",
      "-noout",
      "-ext",
      "subjectAltName",
      "-in",
      join(serverDir, "server.crt"),
    );
    for (
      const expected of [
        "DNS:localhost",
        `DNS:${Deno.hostname().toLowerCase()}`,
        "DNS:svc.example.com",
        "IP Address:127.0.0.1",
        "IP Address:0:0:0:0:0:0:0:1",
        "IP Address:10.1.2.3",
        "IP Address:2001:DB8:0:0:0:0:0:5",
      ]
    ) {
      assert.ok(sans.includes(expected), `${expected} missing from ${sans}`);
    }
    assert.match(await opensslVerify(ca.certPem, result.certPem, "sslserver"), /OK/);
    const keyCheck = await runCommand("sh", [
      "-c",
      `openssl x509 -in "$0" -noout -pubkey; openssl pkey -in "$1" -pubout`,
      join(serverDir, "server.crt"),
      join(serverDir, "server.key"),
    ]);
    const [fromCert, fromKey] = keyCheck.output.split(/(?=-----BEGIN PUBLIC KEY-----)/);
    assert.equal(fromCert, fromKey);

    const again = await ensureInternalServerCert(ca, {
      dataDir,
      hostnames: ["SVC.example.com.", "10.1.2.3"],
    });
    assert.equal(
      again.generated,
      false,
      "a subset of the names, in another spelling, needs no new certificate",
    );
    assert.equal(again.certPem, result.certPem);
  });
});

Deno.test("internal server certificate is renewed when names, CA or expiry require it", async () => {
  const ca = await testCa();
  await withTempDir(async (dataDir) => {
    const first = await ensureInternalServerCert(ca, { dataDir, hostnames: ["a.example"] });

    const added = await ensureInternalServerCert(ca, { dataDir, hostnames: ["a.example", "b.example"] });
    assert.equal(added.generated, true);
    assert.match(added.reason!, /lacks b\.example/);
    assert.notEqual(added.certPem, first.certPem);

    const stillGood = new Date(Date.now() + 300 * DAY_MS);
    assert.equal(
      (await ensureInternalServerCert(ca, { dataDir, hostnames: [], now: stillGood })).generated,
      false,
    );
    const inLastMonth = new Date(Date.now() + 340 * DAY_MS);
    const renewed = await ensureInternalServerCert(ca, { dataDir, hostnames: [], now: inLastMonth });
    assert.equal(renewed.generated, true);
    assert.match(renewed.reason!, /expires/);

    await withTempDir(async (otherDir) => {
      const otherCa = await loadOrCreateCa({ dataDir: otherDir });
      const reissued = await ensureInternalServerCert(otherCa, { dataDir, hostnames: [] });
      assert.equal(reissued.generated, true);
      assert.match(reissued.reason!, /not issued by the current CA/);
      assert.match(await opensslVerify(otherCa.certPem, reissued.certPem, "sslserver"), /OK/);
    });

    await Deno.writeTextFile(join(dataDir, "pki", "server", "server.key"), "garbage");
    const repaired = await ensureInternalServerCert(ca, { dataDir, hostnames: [] });
    assert.equal(repaired.generated, true);
  });
});

Deno.test("server hostnames that are not names are refused", async () => {
  const ca = await testCa();
  await withTempDir(async (dataDir) => {
    await assert.rejects(
      ensureInternalServerCert(ca, { dataDir, hostnames: ["bad name"] }),
      /server\.hostnames entry "bad name" is neither an IP address nor a DNS name/,
    );
  });
});

Deno.test("one of two certificate files configured is a configuration error", async () => {
  const ca = await testCa();
  await withTempDir(async (dataDir) => {
    const caMessage = /ca\.cert_file and ca\.key_file must be set together or both left empty/;
    await assert.rejects(loadOrCreateCa({ dataDir, certFile: "/x/ca.crt" }), caMessage);
    await assert.rejects(loadOrCreateCa({ dataDir, keyFile: "/x/ca.key", certFile: "" }), caMessage);
    const tlsMessage = /tls\.cert_file and tls\.key_file must be set together or both left empty/;
    await assert.rejects(loadOrCreateServerCert(ca, { dataDir, hostnames: [], keyFile: "/x/k" }), tlsMessage);
    await assert.rejects(
      loadOrCreateServerCert(ca, { dataDir, hostnames: [], certFile: "/x/c" }),
      tlsMessage,
    );
    assert.deepEqual(await Array.fromAsync(Deno.readDir(dataDir)), [], "nothing was generated");
  });
});

/** An operator CA made with openssl, the way an administrator would. */
async function opensslCa(
  dir: string,
  keyArgs: (out: string) => string[],
): Promise<{ certFile: string; keyFile: string }> {
  const keyFile = join(dir, "op-ca.key");
  await openssl(...keyArgs(keyFile));
  const { certFile } = await opensslCertificate(dir, {
    name: "op-ca",
    subject: "/O=Example/CN=Example Agents CA",
    days: 30,
    extensions: INTERMEDIATE_CA_EXTENSIONS,
    key: keyFile,
  });
  return { certFile, keyFile };
}

Deno.test("operator CA files load in PKCS#8, SEC1 and PKCS#1 form and sign verifiable certificates", async () => {
  const variants: Record<string, (out: string) => string[]> = {
    "PKCS#8 P-384": (
      out,
    ) => ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", out],
    "SEC1 P-256": (out) => ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", out],
    "PKCS#8 RSA": (out) => ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", out],
    "PKCS#1 RSA": (out) => ["genrsa", "-traditional", "-out", out, "2048"],
    "PKCS#8 P-521": (
      out,
    ) => ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-521", "-out", out],
    "PKCS#8 Ed25519": (out) => ["genpkey", "-algorithm", "ED25519", "-out", out],
  };
  for (const [label, keyArgs] of Object.entries(variants)) {
    await withTempDir(async (dir) => {
      const files = await opensslCa(dir, keyArgs);
      const ca = await loadOrCreateCa({ dataDir: dir, ...files });
      assert.equal(ca.generated, false, label);
      assert.equal(ca.cert.subject, "O=Example, CN=Example Agents CA", label);
      const { csrPem } = await generateKeyAndCsr("node-1");
      const signed = await ca.signCsr(csrPem, { commonName: "node-1" });
      assert.match(await opensslVerify(ca.certPem, signed.certPem, "sslclient"), /OK/, label);
      const server = await ensureInternalServerCert(ca, { dataDir: dir, hostnames: [] });
      assert.match(await opensslVerify(ca.certPem, server.certPem, "sslserver"), /OK/, label);
      assert.equal(await Array.fromAsync(Deno.readDir(join(dir, "pki"))).then((e) => e.length), 1, label);
    });
  }
});

Deno.test("unusable operator CA files are refused with the file and the fix", async () => {
  await withTempDir(async (dir) => {
    const files = await opensslCa(
      dir,
      (out) => ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", out],
    );

    const otherKey = join(dir, "other.key");
    await openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", otherKey);
    await assert.rejects(
      loadOrCreateCa({ dataDir: dir, certFile: files.certFile, keyFile: otherKey }),
      new RegExp(`ca\\.key_file ${otherKey} is not the private key of ca\\.cert_file`),
    );

    const encrypted = join(dir, "enc.key");
    await openssl("pkcs8", "-topk8", "-in", files.keyFile, "-passout", "pass:secret", "-out", encrypted);
    await assert.rejects(
      loadOrCreateCa({ dataDir: dir, certFile: files.certFile, keyFile: encrypted }),
      /ca\.key_file .*enc\.key is encrypted .*openssl pkcs8 -topk8 -nocrypt/,
    );

    const explicitCurve = join(dir, "explicit.key");
    await openssl(
      "ecparam",
      "-name",
      "prime256v1",
      "-genkey",
      "-noout",
      "-param_enc",
      "explicit",
      "-out",
      explicitCurve,
    );
    await assert.rejects(
      loadOrCreateCa({ dataDir: dir, certFile: files.certFile, keyFile: explicitCurve }),
      /ca\.key_file .*explicit\.key: .*openssl pkcs8 -topk8 -nocrypt/,
    );

    await assert.rejects(
      loadOrCreateCa({ dataDir: dir, certFile: join(dir, "missing.crt"), keyFile: files.keyFile }),
      /ca\.cert_file .*missing\.crt cannot be read/,
    );
    await assert.rejects(
      loadOrCreateCa({ dataDir: dir, certFile: files.keyFile, keyFile: files.keyFile }),
      /ca\.cert_file .*op-ca\.key: text is not a PEM certificate/,
    );

    const agent = await generateKeyAndCsr("node-1");
    const agentCert = await (await testCa()).signCsr(agent.csrPem, { commonName: "node-1" });
    const leafCert = join(dir, "leaf.crt");
    const leafKey = join(dir, "leaf.key");
    await Deno.writeTextFile(leafCert, agentCert.certPem);
    await Deno.writeTextFile(leafKey, agent.keyPem);
    await assert.rejects(
      loadOrCreateCa({ dataDir: dir, certFile: leafCert, keyFile: leafKey }),
      /ca\.cert_file .*leaf\.crt is not a CA certificate/,
    );
  });
});

Deno.test("operator TLS files are returned as written after a key check", async () => {
  const ca = await testCa();
  await withTempDir(async (dir) => {
    const keyFile = join(dir, "tls.key");
    await openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", keyFile);
    const { certFile } = await opensslCertificate(dir, {
      name: "tls",
      subject: "/CN=web",
      days: 30,
      key: keyFile,
    });
    const result = await loadOrCreateServerCert(ca, { dataDir: dir, hostnames: [], certFile, keyFile });
    assert.deepEqual(result, {
      certPem: await Deno.readTextFile(certFile),
      keyPem: await Deno.readTextFile(keyFile),
      generated: false,
    });
    assert.equal(
      await Array.fromAsync(Deno.readDir(dir)).then((e) => e.length),
      2,
      "no internal files written",
    );

    const otherKey = join(dir, "other.key");
    await openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", otherKey);
    await assert.rejects(
      loadOrCreateServerCert(ca, { dataDir: dir, hostnames: [], certFile, keyFile: otherKey }),
      /tls\.key_file .*other\.key is not the private key of tls\.cert_file/,
    );
  });
});

Deno.test("a CA created by one call is the one a racing second call loads", async () => {
  await withTempDir(async (dataDir) => {
    const [a, b] = await Promise.all([loadOrCreateCa({ dataDir }), loadOrCreateCa({ dataDir })]);
    assert.equal(a.certPem, b.certPem);
    assert.deepEqual([a.generated, b.generated].sort(), [false, true]);
  });
});

Deno.test("agent certificates carry what the general encoder would write, byte-exact issuer and key ids", async () => {
  const ca = await testCa();
  const { csrPem } = await generateKeyAndCsr("node-1");
  const signed = await ca.signCsr(csrPem, { commonName: "node-1" });
  const cert = decodeCertificate(signed.certPem);
  const expectedKeyId = await x509.SubjectKeyIdentifierExtension.create(cert.publicKey);
  assert.equal(cert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId, expectedKeyId.keyId);
  assert.equal(cert.getExtension(x509.SubjectKeyIdentifierExtension)?.critical, false);
  assert.equal(cert.getExtension(x509.BasicConstraintsExtension)?.critical, true);
  assert.equal(cert.getExtension(x509.ExtendedKeyUsageExtension)?.critical, false);
  assert.deepEqual(
    Array.from(cert.extensions, (e) => e.type),
    ["2.5.29.19", "2.5.29.15", "2.5.29.37", "2.5.29.14", "2.5.29.35"],
  );
  assert.deepEqual(
    new Uint8Array(cert.issuerName.toArrayBuffer()),
    new Uint8Array(ca.cert.subjectName.toArrayBuffer()),
  );
  assert.equal(await cert.verify({ publicKey: ca.cert.publicKey, signatureOnly: true }), true);
  const text = await runCommand("sh", ["-c", `printf '%s' "$0" | openssl x509 -noout -text`, signed.certPem]);
  assert.match(text.output, /Version: 3 \(0x2\)/);
  assert.match(text.output, /Signature Algorithm: ecdsa-with-SHA256/);
  assert.match(text.output, /TLS Web Client Authentication/);
});

Deno.test("a 253-character node name and validity past 2049 encode as openssl reads them", async () => {
  const ca = await testCa();
  const name = "n" + "a".repeat(252);
  const { csrPem } = await generateKeyAndCsr("x");
  // From 2049-12-01 for 90 days: notBefore is a UTCTime, notAfter (2050) must be a GeneralizedTime.
  const now = new Date("2049-12-01T12:34:56.789Z");
  const signed = await ca.signCsr(csrPem, { commonName: name, now });
  assert.equal(signed.notBefore.toISOString(), "2049-12-01T12:33:56.000Z");
  assert.equal(signed.notAfter.toISOString(), "2050-03-01T12:34:56.000Z");
  assert.deepEqual(parseCertificate(signed.certPem), {
    serial: signed.serial,
    commonName: name,
    notBefore: signed.notBefore,
    notAfter: signed.notAfter,
    issuer: "O=svc, CN=svc Internal CA",
  });
  const dates = await runCommand("sh", [
    "-c",
    `printf '%s' "$0" | openssl x509 -noout -subject -startdate -enddate -nameopt RFC2253`,
    signed.certPem,
  ]);
  assert.match(dates.output, new RegExp(`subject=CN=${name}\n`));
  assert.match(dates.output, /notBefore=Dec {2}1 12:33:56 2049 GMT/);
  assert.match(dates.output, /notAfter=Mar {2}1 12:34:56 2050 GMT/);
  await withTempDir(async (dir) => {
    await Deno.writeTextFile(join(dir, "ca.crt"), ca.certPem);
    await Deno.writeTextFile(join(dir, "cert.pem"), signed.certPem);
    // The certificate is not valid yet (and outlives the test CA): openssl checks everything but the time.
    const verified = await runCommand("openssl", [
      "verify",
      "-no_check_time",
      "-CAfile",
      join(dir, "ca.crt"),
      join(dir, "cert.pem"),
    ]);
    assert.match(verified.output, /cert\.pem: OK/);
  });
});

Deno.test("an intermediate operator CA issues agent certificates that openssl verifies up to the root", async () => {
  await withTempDir(async (dir) => {
    const at = (f: string) => join(dir, f);
    const root = await opensslCertificate(dir, {
      name: "root",
      subject: "/O=Example/CN=Example Root",
      days: 30,
      extensions: ROOT_CA_EXTENSIONS,
    });
    const inter = await opensslCertificate(dir, {
      name: "inter",
      subject: "/O=Example/CN=Example Agents Intermediate",
      days: 30,
      curve: "P-384",
      extensions: INTERMEDIATE_CA_EXTENSIONS,
      issuer: root,
    });
    await Deno.writeTextFile(at("chain.crt"), inter.cert + root.cert);
    const ca = await loadOrCreateCa({ dataDir: dir, certFile: at("chain.crt"), keyFile: inter.keyFile });
    const { csrPem } = await generateKeyAndCsr("node-1");
    const signed = await ca.signCsr(csrPem, { commonName: "node-1" });
    await Deno.writeTextFile(at("agent.crt"), signed.certPem);
    const verified = await openssl(
      ...["verify", "-purpose", "sslclient", "-CAfile", root.certFile, "-untrusted", inter.certFile],
      at("agent.crt"),
    );
    assert.match(verified, /agent\.crt: OK/);
    assert.equal(decodeCertificate(signed.certPem).issuer, "O=Example, CN=Example Agents Intermediate");
  });
});
