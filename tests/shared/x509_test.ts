/**
 * The shared X.509 reader (shared/x509.ts) against OpenSSL: certificates made by the openssl command are read
 * field by field as node:crypto's X509Certificate (OpenSSL inside Deno) reads them, and the fingerprint is
 * OpenSSL's. Hostile DER (every truncation, random byte changes, BER, non-minimal lengths, trailing bytes) only
 * ever gives a CertificateParseError.
 */
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import fc from "fast-check";
import {
  CertificateParseError,
  certificatePem,
  parseCertificate,
  pemBlocks,
  pemBodyBytes,
  sha256Fingerprint,
} from "../../shared/x509.ts";
import { makeCertificate } from "../helpers/test_ca.ts";

function derOf(pem: string): Uint8Array {
  return pemBodyBytes(pemBlocks(pem).blocks[0].body);
}

/** RFC 4514 text split into its attributes, outermost first (OpenSSL's multi-line order), unescaped. */
function attributes(rfc4514: string): string[] {
  return rfc4514.split(/(?<!\\),|(?<!\\)\+/).reverse().map((a) => a.replace(/\\(.)/g, "$1"));
}

const CURVE_NAMES: Record<string, string> = {
  "P-256": "prime256v1",
  "P-384": "secp384r1",
  "P-521": "secp521r1",
};

const CASES = [
  { key: "rsa:2048", ca: true as const },
  { key: "rsa:1024", ca: true as const },
  { key: "rsa:3072", ca: false as const },
  { key: "ec:P-256", ca: "absent" as const },
  { key: "ec:P-384", ca: true as const },
  { key: "ec:P-521", ca: true as const },
  { key: "ed25519", ca: true as const },
];

for (const { key, ca } of CASES) {
  Deno.test(`x509: a ${key} certificate (basicConstraints ${ca}) reads as OpenSSL reads it`, async () => {
    const cert = await makeCertificate({
      key,
      ca,
      subject: "/C=DE/O=Bäcker, Söhne & Co/OU=IT/OU=Sec/CN=Root é \\+ x",
      notBefore: new Date("2021-03-04T05:06:07Z"),
      notAfter: new Date("2051-06-01T00:00:00Z"),
    });
    const openssl = new X509Certificate(cert.pem);
    const mine = parseCertificate(derOf(cert.pem));
    assert.deepEqual(attributes(mine.subject), openssl.subject.split("\n"));
    assert.deepEqual(attributes(mine.issuer), openssl.issuer.split("\n"));
    assert.equal(mine.notBefore.getTime(), new Date(openssl.validFrom).getTime());
    assert.equal(mine.notAfter.getTime(), new Date(openssl.validTo).getTime());
    assert.equal(mine.ca === true, openssl.ca);
    assert.equal(mine.ca, ca === "absent" ? undefined : ca);
    assert.equal(BigInt(`0x${mine.serial}`), BigInt(`0x${openssl.serialNumber}`));
    const details = openssl.publicKey.asymmetricKeyDetails!;
    if (mine.key.kind === "rsa") assert.equal(mine.key.bits, details.modulusLength);
    else if (mine.key.kind === "ec") assert.equal(CURVE_NAMES[mine.key.curve], details.namedCurve);
    else assert.equal(mine.key.algorithm.toLowerCase(), openssl.publicKey.asymmetricKeyType);
    assert.equal(mine.keyCertSign, ca === true ? true : undefined);
    assert.equal(await sha256Fingerprint(mine.der), openssl.fingerprint256);
    assert.equal(certificatePem(mine.der).trim(), cert.pem.trim(), "re-encoding gives openssl's PEM");
  });
}

Deno.test("x509: keyUsage without keyCertSign is read as such", async () => {
  const cert = await makeCertificate({ keyUsage: "critical,digitalSignature" });
  assert.equal(parseCertificate(derOf(cert.pem)).keyCertSign, false);
  assert.deepEqual(new X509Certificate(cert.pem).keyUsage, ["DigitalSignature"]);
});

Deno.test("x509: names are escaped so they cannot break a line or hide text", () => {
  // A certificate's subject is shown in the console and in compliance messages; controls come out visible.
  const cert = certWithCommonName("evil\nCN=admin\u202e\u200b");
  const subject = parseCertificate(cert).subject;
  assert.equal(subject, "CN=evil\\u{a}CN\\=admin\\u{202e}\\u{200b}");
});

/** A minimal structurally valid certificate whose subject CN is `cn` (UTF8String), built byte by byte. */
function certWithCommonName(cn: string): Uint8Array {
  const tlv = (tag: number, ...parts: Uint8Array[]) => {
    const body = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) body.set(p, (at += p.length) - p.length);
    const len = body.length < 0x80
      ? [body.length]
      : body.length < 0x100
      ? [0x81, body.length]
      : [0x82, body.length >> 8, body.length & 0xff];
    return new Uint8Array([tag, ...len, ...body]);
  };
  const bytes = (...b: number[]) => new Uint8Array(b);
  const oid = (...b: number[]) => tlv(0x06, bytes(...b));
  const name = tlv(
    0x30,
    tlv(0x31, tlv(0x30, oid(0x55, 0x04, 0x03), tlv(0x0c, new TextEncoder().encode(cn)))),
  );
  const alg = tlv(0x30, oid(0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02));
  const time = (t: string) => tlv(0x17, new TextEncoder().encode(t));
  const point = new Uint8Array(66).fill(1);
  point[0] = 0;
  point[1] = 4;
  const spki = tlv(
    0x30,
    tlv(
      0x30,
      oid(0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01),
      oid(0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07),
    ),
    tlv(0x03, point),
  );
  const tbs = tlv(
    0x30,
    tlv(0xa0, tlv(0x02, bytes(2))),
    tlv(0x02, bytes(1)),
    alg,
    name,
    tlv(0x30, time("250101000000Z"), time("350101000000Z")),
    name,
    spki,
  );
  return tlv(0x30, tbs, alg, tlv(0x03, bytes(0, 1, 2)));
}

Deno.test("x509: every truncation, BER, non-minimal lengths and trailing bytes are refused", async () => {
  const der = derOf((await makeCertificate({ key: "ec:P-256" })).pem);
  for (let n = 0; n < der.length; n++) {
    assert.throws(() => parseCertificate(der.subarray(0, n)), CertificateParseError, `prefix of ${n} bytes`);
  }
  assert.throws(() => parseCertificate(new Uint8Array([...der, 0])), /bytes after the end/);
  const indefinite = Uint8Array.from(der);
  indefinite[1] = 0x80;
  assert.throws(() => parseCertificate(indefinite), /indefinite lengths are BER/);
  // The outer length re-encoded with one more length byte than it needs.
  const long = der[1] & 0x7f;
  const padded = new Uint8Array([0x30, 0x80 | (long + 1), 0, ...der.subarray(2)]);
  assert.throws(() => parseCertificate(padded), /not minimally encoded/);
});

Deno.test("x509: random byte changes give a certificate or a CertificateParseError, nothing else", async () => {
  const der = derOf((await makeCertificate({ key: "rsa:2048" })).pem);
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.nat(der.length - 1), fc.integer({ min: 0, max: 255 })), {
        minLength: 1,
        maxLength: 6,
      }),
      (changes) => {
        const bytes = Uint8Array.from(der);
        for (const [at, value] of changes) bytes[at] = value;
        try {
          parseCertificate(bytes);
        } catch (err) {
          if (!(err instanceof CertificateParseError)) throw err;
        }
      },
    ),
    { numRuns: 2000 },
  );
});

Deno.test("x509: PEM blocks, their labels and text outside them", () => {
  const { blocks, strayText } = pemBlocks(
    "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nBBBB\n-----END PRIVATE KEY-----",
  );
  assert.deepEqual(blocks.map((b) => b.label), ["CERTIFICATE", "PRIVATE KEY"]);
  assert.equal(strayText, false);
  assert.equal(
    pemBlocks("subject=CN=x\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----").strayText,
    true,
  );
  assert.throws(() => pemBodyBytes("Proc-Type: 4,ENCRYPTED\nAAAA"), /not base64/);
  assert.throws(() => pemBodyBytes(""), /not base64/);
});
