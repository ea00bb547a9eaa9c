/**
 * The Certificates and Proxy types' rules (shared/policy_types/certificates.ts and proxy.ts): every refusal
 * names its field and the fix, certificates are judged on what OpenSSL-made certificates really are (CA or
 * not, key, curve, dates), credentials never get into a proxy setting, and the shared hostile corpus is
 * refused in every value that becomes a file name, a host or a URL.
 */
import assert from "node:assert/strict";
import { validatePolicyContent, type ValidationIssue } from "../../shared/policy_types/mod.ts";
import { certificatesType, checkCertificates, trustAnchor } from "../../shared/policy_types/certificates.ts";
import { noProxyEntry, pacUrl, proxyHost } from "../../shared/policy_types/proxy.ts";
import { IssueList } from "../../shared/policy_types/sanitizers.ts";
import { embedded, HOSTILE_STRINGS } from "../helpers/hostile_strings.ts";
import { cpuTime } from "../helpers/stall.ts";
import { makeCertificate } from "../helpers/test_ca.ts";

function describe(issues: ValidationIssue[]): string {
  return issues.map((i) => `${i.field}: ${i.message}`).join("; ");
}

const certs = (...entries: { name: string; pem: string }[]) =>
  validatePolicyContent("Certificates", JSON.stringify({ certificates: entries }));

const RSA = await makeCertificate({ key: "rsa:2048", subject: "/O=Example/CN=Example RSA Root" });
const EC = await makeCertificate({ key: "ec:P-384", subject: "/CN=Example EC Root" });

Deno.test("Certificates: RSA 2048 and EC P-384 CAs pass; each refusal names the entry, the problem and the fix", async () => {
  assert.deepEqual(certs({ name: "rsa-root", pem: RSA.pem }, { name: "ec.root_2", pem: EC.pem }), []);
  const refused: [string, Promise<{ pem: string }> | { pem: string }, RegExp][] = [
    [
      "server certificate",
      makeCertificate({ ca: false }),
      /is not a CA certificate \(CN=svc test CA: basicConstraints cA is false\): distribute the root or intermediate CA/,
    ],
    ["no basicConstraints", makeCertificate({ ca: "absent" }), /basicConstraints cA is absent/],
    [
      "no keyCertSign",
      makeCertificate({ keyUsage: "critical,digitalSignature" }),
      /keyUsage lacks keyCertSign/,
    ],
    [
      "RSA 1024",
      makeCertificate({ key: "rsa:1024" }),
      /RSA key of 1024 bits: trust only CAs with RSA keys of at least 2048 bits or EC keys on P-256 or P-384/,
    ],
    ["P-521", makeCertificate({ key: "ec:P-521" }), /EC key on P-521: accepted curves are P-256 and P-384/],
    ["Ed25519", makeCertificate({ key: "ed25519" }), /has a Ed25519 key: accepted are RSA/],
    [
      "expired",
      makeCertificate({
        notBefore: new Date("2020-01-01T00:00:00Z"),
        notAfter: new Date("2021-02-03T00:00:00Z"),
      }),
      /expired on 2021-02-03 \(CN=svc test CA\): distribute the CA's renewed certificate/,
    ],
    [
      "private key",
      { pem: `${RSA.pem}${RSA.keyPem}` },
      /holds a private key \(PRIVATE KEY\): never put a private key in a policy/,
    ],
    ["two certificates", { pem: `${RSA.pem}${EC.pem}` }, /holds 2 certificates: give each its own entry/],
    ["text outside", { pem: `subject=CN=x\n${RSA.pem}` }, /has text outside the PEM block/],
    ["no PEM", { pem: "MIIB" }, /holds no PEM certificate: paste the text from/],
    ["not base64", { pem: "-----BEGIN CERTIFICATE-----\n%%%%\n-----END CERTIFICATE-----" }, /not base64/],
    [
      "not DER",
      { pem: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----" },
      /is not a readable X.509 certificate: /,
    ],
    ["too long", { pem: "A".repeat(20_000) }, /must be at most 16384 characters/],
  ];
  for (const [label, made, pattern] of refused) {
    const { pem } = await made;
    const text = describe(certs({ name: "root", pem }));
    assert.match(text, /^certificates\[0\]\.pem: /, label);
    assert.match(text, pattern, `${label}: ${text}`);
  }
  assert.match(
    describe(certs({ name: "a", pem: RSA.pem }, { name: "a", pem: EC.pem })),
    /certificates\[1\].name: repeats the name of certificates\[0\]/,
  );
  assert.match(
    describe(certs({ name: "a", pem: RSA.pem }, { name: "b", pem: RSA.pem })),
    /certificates\[1\].pem: is the same certificate as certificates\[0\]/,
  );
  assert.match(
    describe(certs({ name: "", pem: "" })),
    /certificates\[0\].name: is required.*certificates\[0\].pem: is required/,
  );
});

Deno.test("Certificates: the agent's check leaves the date to the entry (an expired certificate does not void the policy)", async () => {
  const expired = await makeCertificate({
    notBefore: new Date("2020-01-01T00:00:00Z"),
    notAfter: new Date("2021-01-01T00:00:00Z"),
  });
  const message = certificatesType.parse(
    JSON.stringify({ certificates: [{ name: "old", pem: expired.pem }] }),
  );
  const atSave = new IssueList();
  checkCertificates(message, atSave, new Date());
  assert.match(describe(atSave.issues), /expired on 2021-01-01/);
  const atAgent = new IssueList();
  checkCertificates(message, atAgent, null);
  assert.deepEqual(atAgent.issues, []);
});

Deno.test("Certificates: hostile names are refused; hostile text around a PEM never passes", () => {
  for (const h of HOSTILE_STRINGS) {
    for (const name of embedded(h, "root")) {
      if (name === "root" || (h.classes.every((c) => c === "option") && !name.startsWith("-"))) continue;
      const text = describe(certs({ name, pem: RSA.pem }));
      // Lone surrogates already fail the JSON decoding, which names the field in its own words.
      assert.match(
        text,
        /certificates\[0\].name: |field name of TrustedCertificate/,
        `${h.name}: ${JSON.stringify(name)}`,
      );
    }
    for (const pem of [`${h.value}${RSA.pem}`, `${RSA.pem}${h.value}`]) {
      if (/^\s*$/.test(h.value)) continue; // whitespace around the block is fine
      assert.match(
        describe(certs({ name: "root", pem })),
        /certificates\[0\].pem: |field pem of TrustedCertificate/,
        h.name,
      );
    }
  }
});

const proxy = (content: Record<string, unknown>) =>
  describe(validatePolicyContent("Proxy", JSON.stringify(content)));
const manual = (host: string, port = 3128) => ({ manual: { http: { host, port } } });

Deno.test("Proxy: manual servers and PAC URLs; each refusal names the field and the fix", () => {
  assert.equal(
    proxy({
      ...manual("proxy.example.com"),
      no_proxy: [
        "localhost",
        "intranet.example.com",
        ".example.com",
        "*.corp.example",
        "10.0.0.0/8",
        "192.168.1.7",
        "fd00::/8",
        "::1",
      ],
    }),
    "",
  );
  assert.equal(
    proxy({ manual: { http: { host: "fd00::1", port: 80 }, https: { host: "10.0.0.1", port: 443 } } }),
    "",
  );
  assert.equal(proxy({ pac_url: "http://wpad.example.com/wpad.dat?site=a&x=1" }), "");
  assert.match(proxy({}), /policy content is empty/);
  assert.match(
    proxy({ no_proxy: [] }),
    /policy content needs at least one setting: set manual \(host and port\) or pac_url/,
  );
  assert.match(proxy({ manual: {} }), /manual.http: is required: give the proxy's host and port/);
  assert.match(proxy(manual("proxy.example.com", 0)), /manual.http.port: must be a port between 1 and 65535/);
  assert.match(
    proxy(manual("proxy.example.com", 70000)),
    /manual.http.port: must be a port between 1 and 65535/,
  );
  assert.match(
    proxy(manual("http://proxy.example.com")),
    /manual.http.host: must be a host name or address without a scheme/,
  );
  assert.match(
    proxy(manual("proxy.example.com:3128")),
    /manual.http.host: must be a host name such as proxy.example.com or an IP address \(no port: give it in port\)/,
  );
  assert.match(proxy(manual("999.1.1.1")), /manual.http.host: must be a valid IPv4 address/);
  assert.match(
    proxy({ manual: { http: { host: "p.example", port: 1 }, https: { host: "", port: 1 } } }),
    /manual.https.host: is required/,
  );
  assert.match(
    proxy({ pac_url: "ftp://wpad.example.com/x.pac" }),
    /pac_url: URL scheme must be http or https, not "ftp"/,
  );
  assert.match(
    proxy({ pac_url: "https://wpad.example.com/a b.pac" }),
    /pac_url: must contain only URL characters: percent-encode the others/,
  );
  assert.match(
    proxy({ pac_url: "https://wpad.example.com/x.pac", no_proxy: [".example.com"] }),
    /no_proxy: applies to a manual proxy only/,
  );
  assert.match(
    proxy({ ...manual("p.example"), no_proxy: ["a.example", "a.example"] }),
    /no_proxy\[1\]: "a.example" is listed twice/,
  );
  assert.match(
    proxy({ ...manual("p.example"), no_proxy: Array.from({ length: 257 }, (_, i) => `h${i}.example`) }),
    /no_proxy: must list at most 256 entries/,
  );
  assert.match(
    proxy({ ...manual("p.example"), no_proxy: ["*"] }),
    /no_proxy\[0\]: must be a host name, a domain/,
  );
});

Deno.test("Proxy: credentials are refused wherever they could be written", () => {
  const credentials = /must not contain credentials: svc never stores proxy passwords/;
  assert.match(proxy(manual("user:secret@proxy.example.com")), credentials);
  assert.match(proxy(manual("user@proxy.example.com")), credentials);
  assert.match(proxy({ pac_url: "https://user:secret@wpad.example.com/proxy.pac" }), credentials);
  assert.match(proxy({ pac_url: "https://user@wpad.example.com/proxy.pac" }), credentials);
  assert.match(proxy({ ...manual("p.example"), no_proxy: ["user:secret@host.example"] }), credentials);
});

Deno.test("Proxy: the hostile corpus is refused in hosts and no-proxy entries, and in PAC URLs", () => {
  for (const h of HOSTILE_STRINGS) {
    for (const value of embedded(h, "proxy.example.com")) {
      // An inner '-' is ordinary in a host name; an option-like value is hostile at the start only.
      if (
        value === "proxy.example.com" || (h.classes.every((c) => c === "option") && !value.startsWith("-"))
      ) {
        continue;
      }
      assert.ok(proxyHost(value), `host ${h.name}: ${JSON.stringify(value)}`);
      assert.ok(noProxyEntry(value), `no_proxy ${h.name}: ${JSON.stringify(value)}`);
    }
    // Inside a URL's path many characters are ordinary URL text; what could be read differently is not.
    for (const value of embedded(h, "https://wpad.example.com/p.pac")) {
      if (
        /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]*$/.test(value) && !/@/.test(value) && value.startsWith("http")
      ) {
        continue;
      }
      assert.ok(pacUrl(value), `pac_url ${h.name}: ${JSON.stringify(value)}`);
    }
  }
});

Deno.test("Certificates: checking hostile PEM text takes time linear in its size", () => {
  // Unterminated and malformed markers at N and 4N characters (the most an entry accepts): a pattern that
  // backtracks over the rest of the text at every marker makes 4N cost 16 times N.
  const pem = (size: number) =>
    "-----BEGIN X-----\n-----BEGIN CERTIFICATE-----A".repeat(Math.floor(size / 45));
  const least = (text: string) =>
    Math.min(...[0, 1, 2, 3, 4].map(() =>
      cpuTime(() => {
        for (let i = 0; i < 100; i++) trustAnchor(text);
      })
    ));
  const [small, large] = [pem(4_000), pem(16_000)];
  least(small);
  const ratio = least(large) / Math.max(least(small), 0.05);
  assert.ok(ratio < 8, `4x the text took ${ratio.toFixed(1)}x the time (linear is 4x, quadratic 16x)`);
  assert.match(String(trustAnchor(large)), /holds no PEM certificate/);
});

Deno.test("Certificates: a malformed PEM label never reaches a message", () => {
  const text = describe(
    certs({ name: "root", pem: "-----BEGIN EVIL\nSet-Cookie: x-----\nAAAA\n-----END EVIL-----" }),
  );
  assert.doesNotMatch(text, /Set-Cookie/);
  assert.match(
    text,
    /certificates\[0\].pem: holds a EVIL block|certificates\[0\].pem: has text outside|holds no PEM/,
  );
});
