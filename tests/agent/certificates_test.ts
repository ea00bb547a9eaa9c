/**
 * The Certificates enforcer on a temp root laid out like a Debian node (a few of Debian's own CA certificates in
 * /usr/share/ca-certificates, /etc/ca-certificates.conf, a bundle built by the real `update-ca-certificates`),
 * through the sync engine with the real enforcers: the CA lands in the store (the bundle holds it, OpenSSL
 * verifies a server certificate it issued, the hashed link exists), in Firefox's policies file and in
 * Chromium's; release puts the store back byte for byte with no link left over; merge, expiry, a failing
 * store tool (put back and rebuilt) and content forced past the server (refused, nothing written, no tool run).
 * A Fedora-layout node runs a stand-in for `update-ca-trust` (Fedora's tool is not packaged in Debian).
 */
import assert from "node:assert/strict";
import { CertificatesPolicySchema } from "../../shared/gen/svc/policy/v1/certificates_pb.ts";
import type { CachedPolicy } from "../../agent/sync/types.ts";
import { Runner } from "../../agent/runner.ts";
import { derBase64, pemBlocks, pemBodyBytes } from "../../shared/x509.ts";
import {
  engineFor,
  firefoxPolicy,
  nodeTest,
  policyMaker,
  readFirefoxFile,
  type TempNode,
  tempNode,
} from "./helpers.ts";
import { issueServerCertificate, makeCertificate, type TestCert } from "../helpers/test_ca.ts";

const HAVE_TOOL = await Deno.stat("/usr/sbin/update-ca-certificates").then(() => true, () => false);
if (!HAVE_TOOL) {
  console.warn("update-ca-certificates missing (Debian ca-certificates): Certificates tests skipped");
}

const DEBIAN_CAS = ["ISRG_Root_X1.crt", "DigiCert_Global_Root_G2.crt", "Amazon_Root_CA_1.crt"];
const BUNDLE = "etc/ssl/certs/ca-certificates.crt";
const ANCHORS = "usr/local/share/ca-certificates";

const certificatesPolicy = policyMaker(CertificatesPolicySchema, "Certificates", "certs");

/** Runs the real update-ca-certificates on the root, as a node's package installation would. */
async function updateStore(root: string): Promise<void> {
  const out = await new Deno.Command("update-ca-certificates", {
    args: [
      "--fresh",
      "--certsconf",
      `${root}/etc/ca-certificates.conf`,
      "--certsdir",
      `${root}/usr/share/ca-certificates`,
      "--localcertsdir",
      `${root}/${ANCHORS}`,
      "--etccertsdir",
      `${root}/etc/ssl/certs`,
      "--hooksdir",
      `${root}/etc/ca-certificates/update.d`,
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
}

/** A temp node with Debian's trust store (three of Debian's CAs) and, by default, Firefox and Chromium. */
async function debianNode(options: { browsers?: boolean } = {}): Promise<TempNode> {
  const browsers = options.browsers ?? true;
  const node = await tempNode({ firefox: browsers, original: null });
  const root = node.root;
  await Deno.mkdir(`${root}/usr/share/ca-certificates/mozilla`, { recursive: true });
  await Deno.mkdir(`${root}/etc/ssl/certs`, { recursive: true });
  await Deno.mkdir(`${root}/${ANCHORS}`, { recursive: true });
  for (const name of DEBIAN_CAS) {
    await Deno.copyFile(
      `/usr/share/ca-certificates/mozilla/${name}`,
      `${root}/usr/share/ca-certificates/mozilla/${name}`,
    );
  }
  await Deno.writeTextFile(
    `${root}/etc/ca-certificates.conf`,
    DEBIAN_CAS.map((n) => `mozilla/${n}\n`).join(""),
  );
  if (browsers) await Deno.mkdir(`${root}/usr/lib/chromium`, { recursive: true });
  await updateStore(root);
  return node;
}

async function bundleIds(node: TempNode): Promise<Set<string>> {
  const text = await Deno.readTextFile(`${node.root}/${BUNDLE}`);
  return new Set(pemBlocks(text).blocks.map((b) => derBase64(pemBodyBytes(b.body))));
}

function idOf(cert: TestCert): string {
  return derBase64(pemBodyBytes(pemBlocks(cert.pem).blocks[0].body));
}

async function opensslVerify(caFile: string, leafPem: string): Promise<boolean> {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/leaf.pem`, leafPem);
    const out = await new Deno.Command("openssl", {
      args: ["verify", "-CAfile", caFile, `${dir}/leaf.pem`],
      stdout: "null",
      stderr: "null",
    }).output();
    return out.success;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Links in /etc/ssl/certs that point nowhere. */
async function danglingLinks(node: TempNode): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(`${node.root}/etc/ssl/certs`)) {
    if (entry.isSymlink && !(await Deno.stat(`${node.root}/etc/ssl/certs/${entry.name}`).catch(() => null))) {
      out.push(entry.name);
    }
  }
  return out;
}

const CA_RSA = await makeCertificate({ key: "rsa:2048", subject: "/O=Example Corp/CN=Example Corp Root" });
const CA_EC = await makeCertificate({ key: "ec:P-256", subject: "/CN=Example Corp Issuing" });

nodeTest(
  "certificates: a CA lands in the Debian store, Firefox and Chromium; release restores the store exactly",
  { make: debianNode, ignore: !HAVE_TOOL },
  async (node) => {
    const originalBundle = await Deno.readTextFile(`${node.root}/${BUNDLE}`);
    const originalLinks = [...Deno.readDirSync(`${node.root}/etc/ssl/certs`)].map((e) => e.name).sort();
    const leaf = await issueServerCertificate(CA_RSA, ["intranet.example.com"]);
    assert.equal(await opensslVerify(`${node.root}/${BUNDLE}`, leaf.pem), false, "not trusted before");

    const { engine, reports } = await engineFor(node);
    const policy = certificatesPolicy({
      certificates: [{ name: "corp-root", pem: CA_RSA.pem }, { name: "corp-issuing", pem: CA_EC.pem }],
    }, { name: "corp trust" });
    engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: true });
    await engine.idle();

    const result = reports.get(policy.id)!;
    assert.equal(result.status, "COMPLIANT", JSON.stringify(result, null, 2));
    const file = `${node.root}/${ANCHORS}/svc-policy-corp-root.crt`;
    assert.equal(await Deno.readTextFile(file), CA_RSA.pem);
    assert.equal((await Deno.stat(file)).mode! & 0o777, 0o644);
    const ids = await bundleIds(node);
    assert.ok(ids.has(idOf(CA_RSA)) && ids.has(idOf(CA_EC)), "both CAs are in the bundle");
    for (const name of DEBIAN_CAS) {
      assert.match(await Deno.readTextFile(`${node.root}/${BUNDLE}`), /BEGIN/, name);
    }
    assert.equal(ids.size, DEBIAN_CAS.length + 2, "Debian's own CAs stay");
    assert.ok(
      await opensslVerify(`${node.root}/${BUNDLE}`, leaf.pem),
      "OpenSSL trusts a server certificate it issued",
    );
    const hash = new TextDecoder().decode(
      (await new Deno.Command("openssl", {
        args: ["x509", "-noout", "-subject_hash", "-in", file],
        stdout: "piped",
      })
        .output()).stdout,
    ).trim();
    assert.equal(await Deno.realPath(`${node.root}/etc/ssl/certs/${hash}.0`), await Deno.realPath(file));

    const firefox = await readFirefoxFile(node) as { policies: { Certificates: { Install: string[] } } };
    assert.deepEqual(
      firefox.policies.Certificates.Install.sort(),
      [
        "/usr/local/share/ca-certificates/svc-policy-corp-issuing.crt",
        "/usr/local/share/ca-certificates/svc-policy-corp-root.crt",
      ].sort(),
    );
    const chromium = JSON.parse(
      await Deno.readTextFile(`${node.root}/etc/chromium/policies/managed/svc_policies.json`),
    );
    assert.deepEqual(new Set(chromium.CACertificates), new Set([idOf(CA_RSA), idOf(CA_EC)]));
    const where = (schemaId: string) =>
      result.items.filter((i) => i.schemaId === schemaId).map((i) => `${i.key}:${i.status}`).sort();
    assert.deepEqual(where("/etc/ssl/certs/ca-certificates.crt"), [
      "corp-issuing:COMPLIANT",
      "corp-root:COMPLIANT",
    ]);
    assert.deepEqual(where("/etc/firefox/policies/policies.json"), [
      "corp-issuing:COMPLIANT",
      "corp-root:COMPLIANT",
    ]);
    assert.deepEqual(where("/etc/chromium/policies/managed/svc_policies.json"), [
      "corp-issuing:COMPLIANT",
      "corp-root:COMPLIANT",
    ]);

    engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
    await engine.idle();
    assert.equal(
      await Deno.readTextFile(`${node.root}/${BUNDLE}`),
      originalBundle,
      "the bundle is Debian's again",
    );
    assert.deepEqual(
      [...Deno.readDirSync(`${node.root}/etc/ssl/certs`)].map((e) => e.name).sort(),
      originalLinks,
    );
    assert.deepEqual(await danglingLinks(node), []);
    assert.deepEqual([...Deno.readDirSync(`${node.root}/${ANCHORS}`)], []);
    assert.equal(
      await opensslVerify(`${node.root}/${BUNDLE}`, leaf.pem),
      false,
      "not trusted after release",
    );
    assert.equal(
      await readFirefoxFile(node),
      undefined,
      "Firefox's policies file was svc's alone: removed",
    );
    assert.equal(
      await Deno.stat(`${node.root}/etc/chromium/policies/managed/svc_policies.json`).catch(() => null),
      null,
    );
  },
);

nodeTest(
  "certificates: merge across policies and with a Firefox policy; an expired entry is reported and skipped",
  { make: debianNode, ignore: !HAVE_TOOL },
  async (node) => {
    const other = await makeCertificate({ key: "ec:P-384", subject: "/CN=Other Root" });
    const expired = await makeCertificate({
      subject: "/CN=Old Root",
      notBefore: new Date("2019-01-01T00:00:00Z"),
      notAfter: new Date("2022-05-06T00:00:00Z"),
    });
    const high = certificatesPolicy({
      certificates: [{ name: "root", pem: CA_RSA.pem }, { name: "old", pem: expired.pem }],
    }, { priority: 10, name: "high" });
    const low = certificatesPolicy({
      certificates: [{ name: "root", pem: other.pem }, { name: "same-root", pem: CA_RSA.pem }],
    }, { priority: 1, name: "low" });
    const ff = firefoxPolicy({
      certificates: { install: ["/usr/lib/mozilla/certificates/extra.der"] },
      disableTelemetry: true,
    }, { priority: 5 });
    const { engine, reports } = await engineFor(node);
    for (const policy of [high, low, ff]) {
      engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: false });
    }
    engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
    await engine.idle();

    assert.deepEqual(
      [...Deno.readDirSync(`${node.root}/${ANCHORS}`)].map((e) => e.name),
      [
        "svc-policy-root.crt",
      ],
    );
    assert.equal(await Deno.readTextFile(`${node.root}/${ANCHORS}/svc-policy-root.crt`), CA_RSA.pem);
    const ids = await bundleIds(node);
    assert.ok(ids.has(idOf(CA_RSA)) && !ids.has(idOf(other)) && !ids.has(idOf(expired)));

    const highResult = reports.get(high.id)!;
    assert.equal(highResult.status, "NON_COMPLIANT");
    const old = highResult.items.find((i) => i.key === "old")!;
    assert.equal(old.status, "NON_COMPLIANT");
    assert.match(
      old.message,
      /expired on 2022-05-06 \(CN=Old Root\): distribute the CA's renewed certificate; not installed/,
    );

    const lowResult = reports.get(low.id)!;
    const root = lowResult.items.find((i) => i.key === "root")!;
    assert.equal(root.status, "INAPPLICABLE");
    assert.match(root.message, /overridden by higher-priority policy "high"/);
    const same = lowResult.items.filter((i) => i.key === "same-root");
    assert.ok(same.every((i) => i.status === "COMPLIANT"), JSON.stringify(same));
    assert.match(same[0].message, /installed as root by policy "high"/);
    assert.equal(lowResult.status, "COMPLIANT");

    // Firefox's own Certificates.Install entry and the Certificates type's add up; the Firefox policy is in effect.
    const firefox = await readFirefoxFile(node) as { policies: { Certificates: { Install: string[] } } };
    assert.deepEqual(firefox.policies.Certificates.Install.sort(), [
      "/usr/lib/mozilla/certificates/extra.der",
      "/usr/local/share/ca-certificates/svc-policy-root.crt",
    ]);
    assert.equal(reports.get(ff.id)!.status, "COMPLIANT", JSON.stringify(reports.get(ff.id)));
  },
);

nodeTest("certificates: a failing update-ca-certificates puts the previous files back and rebuilds", {
  make: () => debianNode({ browsers: false }),
  ignore: !HAVE_TOOL,
}, async (node) => {
  const { engine, reports } = await engineFor(node);
  const first = certificatesPolicy({ certificates: [{ name: "first", pem: CA_RSA.pem }] });
  engine.handleEvent({ kind: "SNAPSHOT", policy: first, snapshotComplete: true });
  await engine.idle();
  assert.equal(reports.get(first.id)!.status, "COMPLIANT");

  // The links directory replaced by a file: update-ca-certificates cannot enter it and exits non-zero.
  await Deno.rename(`${node.root}/etc/ssl/certs`, `${node.root}/etc/ssl/certs.saved`);
  await Deno.writeTextFile(`${node.root}/etc/ssl/certs`, "");
  const second = certificatesPolicy({ certificates: [{ name: "second", pem: CA_EC.pem }] });
  engine.handleEvent({ kind: "SNAPSHOT", policy: second, snapshotComplete: true });
  await engine.idle();
  const failed = reports.get(second.id)!;
  assert.equal(failed.status, "ERROR");
  assert.match(
    failed.message,
    /update-ca-certificates failed: .*\(previous certificate files restored\)/,
  );
  assert.deepEqual([...Deno.readDirSync(`${node.root}/${ANCHORS}`)].map((e) => e.name), [
    "svc-policy-first.crt",
  ]);
});

nodeTest(
  "certificates: content forced past the server is refused by the agent; nothing written, no tool run",
  { make: () => debianNode({ browsers: false }), ignore: !HAVE_TOOL },
  async (node) => {
    const runner = new Runner();
    const { engine, reports } = await engineFor(node, { runner });
    const bundle = await Deno.readTextFile(`${node.root}/${BUNDLE}`);
    const hostile = [
      { name: "../../../etc/cron.d/evil", pem: CA_RSA.pem },
      { name: "key", pem: `${CA_RSA.pem}${CA_RSA.keyPem}` },
      { name: "leaf", pem: (await issueServerCertificate(CA_RSA, ["x.example"])).pem },
      { name: "two", pem: `${CA_RSA.pem}${CA_EC.pem}` },
    ];
    for (const entry of hostile) {
      const policy: CachedPolicy = {
        id: `hostile-${entry.name.length}`,
        name: "hostile",
        type: "Certificates",
        version: 1,
        priority: 0,
        content: JSON.stringify({ certificates: [entry] }),
      };
      engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: true });
      await engine.idle();
      const result = reports.get(policy.id)!;
      assert.equal(result.status, "ERROR", entry.name);
      assert.match(
        result.message,
        /^policy content rejected by the agent: certificates\[0\]\.(name|pem): /,
      );
    }
    assert.deepEqual([...Deno.readDirSync(`${node.root}/${ANCHORS}`)], []);
    assert.equal(await Deno.readTextFile(`${node.root}/${BUNDLE}`), bundle);
    assert.deepEqual(runner.history.filter((c) => c.cmd.includes("update-ca")), []);
  },
);

Deno.test("certificates: a Fedora-layout node gets its anchors in /etc/pki/ca-trust/source/anchors", async () => {
  const node = await tempNode({ firefox: false, original: null });
  const bin = await Deno.makeTempDir({ prefix: "svc-fedora-bin-" });
  try {
    const root = node.root;
    await Deno.mkdir(`${root}/etc/pki/ca-trust/source/anchors`, { recursive: true });
    await Deno.mkdir(`${root}/etc/pki/ca-trust/extracted/pem`, { recursive: true });
    // Stands in for Fedora's update-ca-trust (not packaged in Debian): extracts the anchors into the bundle.
    await Deno.writeTextFile(
      `${bin}/update-ca-trust`,
      `#!/bin/sh\n[ "$1" = extract ] || exit 2\ncat "${root}"/etc/pki/ca-trust/source/anchors/*.crt > "${root}/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem" 2>/dev/null || : > "${root}/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"\n`,
      { mode: 0o755 },
    );
    const runner = new Runner({ path: `${bin}:/usr/bin:/bin` });
    const { engine, reports } = await engineFor(node, { runner });
    const policy = certificatesPolicy({ certificates: [{ name: "corp", pem: CA_EC.pem }] });
    engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: true });
    await engine.idle();
    assert.equal(
      await Deno.readTextFile(`${root}/etc/pki/ca-trust/source/anchors/svc-policy-corp.crt`),
      CA_EC.pem,
    );
    const result = reports.get(policy.id)!;
    assert.equal(result.status, "COMPLIANT", JSON.stringify(result));
    assert.equal(result.items[0].schemaId, "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem");
    assert.deepEqual(
      runner.history.map((c) => [c.cmd, ...c.args]).filter((c) => c[0] === "update-ca-trust"),
      [[
        "update-ca-trust",
        "extract",
      ]],
    );
  } finally {
    await node.cleanup();
    await Deno.remove(bin, { recursive: true });
  }
});

nodeTest(
  "certificates: without a known trust store the store and Firefox are INAPPLICABLE, Chromium still trusts",
  { make: () => tempNode({ firefox: true, original: null }) },
  async (node) => {
    await Deno.mkdir(`${node.root}/usr/lib/chromium`, { recursive: true });
    const runner = new Runner({ path: "/nonexistent" });
    const { engine, reports } = await engineFor(node, { runner });
    const policy = certificatesPolicy({ certificates: [{ name: "corp", pem: CA_RSA.pem }] });
    engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: true });
    await engine.idle();
    const result = reports.get(policy.id)!;
    const status = Object.fromEntries(result.items.map((i) => [i.schemaId, i.status]));
    assert.deepEqual(status, {
      "system trust store": "INAPPLICABLE",
      "/etc/firefox/policies/policies.json": "INAPPLICABLE",
      "/etc/chromium/policies/managed/svc_policies.json": "COMPLIANT",
    });
    assert.match(
      result.items[0].message,
      /no system trust store this agent knows: looked for update-ca-certificates/,
    );
    assert.equal(result.status, "COMPLIANT");
  },
);
