/**
 * Polkit enforcer: generated rules files parsed with a JavaScript parser and run against a small polkit
 * stand-in to prove the decisions (file order = binding priority, first result wins); stale svc files removed,
 * foreign files untouched; hostile strings forced past the server refused or inert; and, with polkitd and
 * dbus-daemon installed, the real polkitd (private system bus, rules directory bind-mounted in a private mount
 * namespace) answers pkcheck as the rules say and pkaction lists the catalogue's actions.
 */
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { type PolkitPolicy, PolkitPolicySchema } from "../../shared/gen/svc/policy/v1/polkit_pb.ts";
import { POLKIT_MARKER, polkitFileName, renderPolkitRules } from "../../shared/polkit_js.ts";
import { pkcheckAs, pkcheckSubject, polkitEnforcer } from "../../agent/enforcers/polkit.ts";
import { checkPolkitScript, PolkitScriptError } from "../../agent/enforcers/polkit_script.ts";
import { parsePkactionVerbose, PolkitCatalogueReporter, scanPolkitActions } from "../../agent/catalogue.ts";
import { Runner } from "../../agent/runner.ts";
import type { CachedPolicy } from "../../agent/sync/types.ts";
import { nodeTest, policyMaker, syncWith, type TempNode, tempNode } from "./helpers.ts";
import { HOSTILE_STRINGS } from "../helpers/hostile_strings.ts";

const policy = policyMaker(PolkitPolicySchema, "Polkit", "pk", (id) => `polkit ${id}`);

async function polkitNode(): Promise<TempNode> {
  const node = await tempNode({ firefox: false, original: null });
  await Deno.mkdir(`${node.root}/etc/polkit-1/rules.d`, { recursive: true });
  await Deno.mkdir(`${node.root}/usr/share/polkit-1/actions`, { recursive: true });
  const actions = "/usr/share/polkit-1/actions";
  if ((await Deno.stat(actions).catch(() => undefined))?.isDirectory) {
    for await (const e of Deno.readDir(actions)) {
      if (e.isFile || e.isSymlink) {
        await Deno.copyFile(`${actions}/${e.name}`, `${node.root}${actions}/${e.name}`);
      }
    }
  }
  return node;
}

const run = (node: TempNode, policies: CachedPolicy[]) => syncWith(node, [polkitEnforcer], policies);

interface Subject {
  user: string;
  groups: string[];
  local: boolean;
  active: boolean;
}

/**
 * A polkit stand-in: runs every rules file of the directory in lexical order with a `polkit` object whose
 * addRule collects the functions, then asks them in order for (action, subject) like polkitd: the first
 * result wins; undefined when no rule decides.
 */
async function decide(
  dir: string,
  actionId: string,
  subject: Subject,
  details: Record<string, string> = {},
): Promise<string | undefined> {
  const names = [];
  for await (const e of Deno.readDir(dir)) if (e.name.endsWith(".rules")) names.push(e.name);
  names.sort();
  const rules: ((a: unknown, s: unknown) => unknown)[] = [];
  const Result = {
    NO: "no",
    YES: "yes",
    AUTH_SELF: "auth_self",
    AUTH_SELF_KEEP: "auth_self_keep",
    AUTH_ADMIN: "auth_admin",
    AUTH_ADMIN_KEEP: "auth_admin_keep",
    NOT_HANDLED: "not_handled",
  };
  const polkit = { Result, addRule: (f: (a: unknown, s: unknown) => unknown) => rules.push(f) };
  for (const name of names) new Function("polkit", await Deno.readTextFile(`${dir}/${name}`))(polkit);
  const action = { id: actionId, lookup: (k: string) => details[k] };
  const subj = { ...subject, isInGroup: (g: string) => subject.groups.includes(g) };
  for (const rule of rules) {
    const r = rule(action, subj);
    if (r !== undefined && r !== "not_handled") return r as string;
  }
  return undefined;
}

const ALICE: Subject = { user: "alice", groups: ["users", "wheel"], local: true, active: true };
const BOB: Subject = { user: "bob", groups: ["users"], local: true, active: true };
const REMOTE_BOB: Subject = { ...BOB, local: false };

nodeTest("polkit: generated rules decide as intended in a polkit stand-in; higher priority evaluated first", {
  make: polkitNode,
}, async (node) => {
  const high = policy({
    rules: [{
      name: "admins-mount",
      description: "Wheel may mount without a password",
      actionPrefixes: ["org.freedesktop.udisks2."],
      match: { unixGroups: ["wheel"] },
      result: 2,
    }, {
      name: "no-remote-reboot",
      actionIds: ["org.freedesktop.login1.reboot"],
      match: { requireLocal: true, excludeUnixUsers: ["alice"] },
      result: 5,
    }],
  }, { id: "high", priority: 100 });
  const low = policy({
    rules: [{
      name: "deny-mount",
      actionIds: ["org.freedesktop.udisks2.filesystem-mount"],
      result: 1,
    }, {
      name: "fs-kind",
      actionIds: ["org.freedesktop.udisks2.filesystem-mount-other-seat"],
      actionConditions: [{ key: "drive.removable", value: "true" }],
      result: 6,
    }],
  }, { id: "low", priority: -3 });
  const { reports } = await run(node, [low, high]);
  assert.equal(reports.get("high")!.status, "COMPLIANT", JSON.stringify(reports.get("high")));
  assert.equal(reports.get("low")!.status, "COMPLIANT", JSON.stringify(reports.get("low")));
  const dir = `${node.root}/etc/polkit-1/rules.d`;
  const files = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
  assert.deepEqual(files, [polkitFileName("high", 100), polkitFileName("low", -3)]);
  for (const f of files) {
    const text = await Deno.readTextFile(`${dir}/${f}`);
    assert.ok(text.startsWith(POLKIT_MARKER));
    checkPolkitScript(text, 2);
  }
  // The higher-priority file is evaluated first: wheel may mount although the lower one says NO.
  assert.equal(await decide(dir, "org.freedesktop.udisks2.filesystem-mount", ALICE), "yes");
  assert.equal(await decide(dir, "org.freedesktop.udisks2.filesystem-mount", BOB), "no");
  assert.equal(await decide(dir, "org.freedesktop.login1.reboot", BOB), "auth_admin");
  assert.equal(await decide(dir, "org.freedesktop.login1.reboot", REMOTE_BOB), undefined);
  assert.equal(await decide(dir, "org.freedesktop.login1.reboot", ALICE), undefined);
  assert.equal(
    await decide(dir, "org.freedesktop.udisks2.filesystem-mount-other-seat", BOB, {
      "drive.removable": "true",
    }),
    "auth_admin_keep",
  );
  assert.equal(
    await decide(dir, "org.freedesktop.udisks2.filesystem-mount-other-seat", BOB, {
      "drive.removable": "false",
    }),
    undefined,
  );

  // Swapping the priorities swaps the order and the decision.
  const { reports: r2 } = await run(node, [{ ...low, priority: 200 }, high]);
  assert.equal(r2.get("low")!.status, "COMPLIANT");
  assert.equal(await decide(dir, "org.freedesktop.udisks2.filesystem-mount", ALICE), "no");
  assert.equal([...Deno.readDirSync(dir)].length, 2, "the file of the old priority is gone");
});

nodeTest("polkit: stale svc files removed, foreign files never touched; empty set removes svc's files", {
  make: polkitNode,
}, async (node) => {
  const dir = `${node.root}/etc/polkit-1/rules.d`;
  const foreign = "polkit.addRule(function (action, subject) { return polkit.Result.NOT_HANDLED; });\n";
  await Deno.writeTextFile(`${dir}/49-admin.rules`, foreign);
  // An svc file the agent's state does not know (state lost).
  await Deno.writeTextFile(`${dir}/10-svc-0000000000-orphan.rules`, `${POLKIT_MARKER}\n`);
  const p = policy({ rules: [{ name: "r", actionIds: ["org.freedesktop.login1.reboot"], result: 1 }] });
  await run(node, [p]);
  assert.deepEqual(
    [...Deno.readDirSync(dir)].map((e) => e.name).sort(),
    [
      polkitFileName(p.id, 0),
      "49-admin.rules",
    ].sort(),
  );
  await run(node, []);
  assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["49-admin.rules"]);
  assert.equal(await Deno.readTextFile(`${dir}/49-admin.rules`), foreign);
});

Deno.test("polkit: an action id the node lacks is INAPPLICABLE for that rule only; no polkit → INAPPLICABLE", async () => {
  const node = await polkitNode();
  try {
    const known = (await scanPolkitActions(node.fs))?.[0]?.actionId ?? "org.freedesktop.policykit.exec";
    const p = policy({
      rules: [
        { name: "known", actionIds: [known], result: 5 },
        { name: "missing", actionIds: ["org.example.not-installed"], result: 1 },
      ],
    });
    const { reports } = await run(node, [p]);
    const r = reports.get(p.id)!;
    assert.equal(r.status, "COMPLIANT", JSON.stringify(r));
    const missing = r.items.find((i) => i.key === "rules[1].action:org.example.not-installed")!;
    assert.equal(missing.status, "INAPPLICABLE");
    assert.match(missing.message, /not registered on this node/);
    if (known !== "org.freedesktop.policykit.exec") {
      assert.equal(r.items.find((i) => i.key === `rules[0].action:${known}`)!.status, "COMPLIANT");
    }
  } finally {
    await node.cleanup();
  }
  const bare = await tempNode({ firefox: false, original: null });
  try {
    const p = policy({ rules: [{ name: "r", actionIds: ["a.b"], result: 1 }] });
    const { reports } = await run(bare, [p]);
    assert.equal(reports.get(p.id)!.status, "INAPPLICABLE");
    assert.equal(await Deno.stat(`${bare.root}/etc/polkit-1`).then(() => true, () => false), false);
  } finally {
    await bare.cleanup();
  }
});

Deno.test("polkit: the script check refuses anything but the expected addRule calls", () => {
  const good = renderPolkitRules(
    create(PolkitPolicySchema, {
      rules: [{ name: "r", actionIds: ["a.b"], match: { unixUsers: ["u"] }, result: 1 }],
    }),
    { policyId: "p", policyName: "n" },
  );
  checkPolkitScript(good, 1);
  const bad: [string, string][] = [
    [good + "polkit.addRule(function (action, subject) { return polkit.Result.YES; });", "statements"],
    [good.replace("return polkit.Result.NO;", "return polkit.Result.YES || 1;"), "does not end"],
    [good.replace("return;", "{ polkit.spawn(['id']); return; }"), "only"],
    [good.replace('subject.user === "u"', 'polkit.spawn(["id"])'), "unexpected call"],
    [good.replace('subject.user === "u"', "subject.user == 'u'"), "operator =="],
    [good.replace('"a.b"', '"a.b" + x'), "non-string"],
    [
      good.replace("function (action, subject)", "function (action, subject, x)"),
      "function (action, subject)",
    ],
    [good.replace("});", "}); x = 1;"), "statements"],
    [good + "*/", "does not parse"],
    [good.replace('!(subject.user === "u")', '!subject.user === "u"'), "unexpected comparison"],
    [good.replace('subject.user === "u"', "subject.local && subject.active"), "operator &&"],
  ];
  for (const [text, expected] of bad) {
    assert.throws(
      () => checkPolkitScript(text, 1),
      (e: Error) => e instanceof PolkitScriptError && e.message.includes(expected),
      expected,
    );
  }
});

nodeTest(
  "polkit: hostile strings forced past the server are refused or inert; the file stays exactly the addRule calls",
  { make: polkitNode },
  async (node) => {
    const cases: { p: CachedPolicy; value: string }[] = [];
    for (const h of HOSTILE_STRINGS) {
      const raw = (rule: Record<string, unknown>) =>
        policy({}, {
          typed: false,
          content: JSON.stringify({ rules: [{ action_ids: ["a.b"], result: "POLKIT_RESULT_YES", ...rule }] }),
        });
      cases.push({ p: raw({ description: `d${h.value}` }), value: h.value });
      cases.push({ p: raw({ name: `n${h.value}` }), value: h.value });
      cases.push({ p: raw({ action_ids: [`a.b${h.value}`] }), value: h.value });
      cases.push({ p: raw({ action_prefixes: [`org.${h.value}`] }), value: h.value });
      cases.push({
        p: raw({ match: { unix_users: [`u${h.value}`], unix_groups: [`g${h.value}`] } }),
        value: h.value,
      });
      cases.push({
        p: raw({ action_conditions: [{ key: `k${h.value}`, value: `v${h.value}` }] }),
        value: h.value,
      });
      cases.push({ p: raw({ action_conditions: [{ key: "k", value: `v${h.value}` }] }), value: h.value });
    }
    const { reports } = await run(node, cases.map((c) => c.p));
    const dir = `${node.root}/etc/polkit-1/rules.d`;
    let refused = 0;
    for (const { p, value } of cases) {
      const r = reports.get(p.id)!;
      if (r.status === "ERROR") {
        assert.match(r.message, /rejected by the agent/);
        refused++;
        continue;
      }
      // Accepted (free text such as a description or an action-detail value): inert in the file.
      const text = await Deno.readTextFile(`${dir}/${polkitFileName(p.id, 0)}`);
      checkPolkitScript(text, 1);
      assert.match(text, /^[\x20-\x7e\n]*$/, "the file is printable ASCII lines only");
      assert.equal(
        text.split("\n").filter((l) => l.startsWith("polkit.addRule")).length,
        1,
        JSON.stringify(value),
      );
    }
    assert.ok(refused > cases.length / 2, `${refused} of ${cases.length} refused`);
    // Every file together still decides only what the rules say: nothing injected runs.
    const d = await decide(dir, "a.b", BOB);
    assert.ok(d === "yes" || d === undefined);
  },
);

/** Root, unshare, dbus-daemon and polkitd are all here: run the real authority. */
async function realPolkitAvailable(): Promise<string | undefined> {
  if (Deno.uid?.() !== 0) return "not root (polkitd needs root and a private mount namespace)";
  for (
    const tool of [
      "/usr/lib/polkit-1/polkitd",
      "/usr/bin/dbus-daemon",
      "/usr/bin/unshare",
      "/usr/bin/pkcheck",
    ]
  ) {
    if (!(await Deno.stat(tool).then(() => true, () => false))) {
      return `${tool} is missing (apt-get install polkitd dbus)`;
    }
  }
  return undefined;
}

const REAL = await realPolkitAvailable();
if (REAL) console.warn(`real polkitd test skipped: ${REAL}`);

Deno.test({
  name:
    "polkit: the real polkitd evaluates svc's files as the stand-in does; pkaction lists the catalogue's actions",
  ignore: REAL !== undefined,
  async fn() {
    const node = await polkitNode();
    const base = await Deno.makeTempDir({ prefix: "svc-polkitd-" });
    const children: Deno.ChildProcess[] = [];
    try {
      // polkitd drops to its own user before it connects: the bus socket must be reachable for it.
      await Deno.chmod(base, 0o755);
      const socket = `${base}/bus.sock`;
      await Deno.writeTextFile(
        `${base}/bus.conf`,
        `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>system</type><listen>unix:path=${socket}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow receive_sender="*"/><allow eavesdrop="true"/><allow own="*"/><allow user="*"/></policy></busconfig>`,
      );
      const env = { DBUS_SYSTEM_BUS_ADDRESS: `unix:path=${socket}` };
      children.push(
        new Deno.Command("dbus-daemon", {
          args: [`--config-file=${base}/bus.conf`, "--nofork"],
          stdout: "null",
          stderr: "null",
        })
          .spawn(),
      );
      const p = policy({
        rules: [{
          name: "nobody-hostname",
          actionIds: ["org.freedesktop.hostname1.set-hostname"],
          match: { unixUsers: ["nobody"] },
          result: 2,
        }, {
          name: "no-reboot",
          description: 'Nobody reboots */ polkit.addRule(function(){return polkit.Result.YES;}); /* "',
          actionPrefixes: ["org.freedesktop.login1.reboot"],
          result: 1,
        }],
      }, { priority: 10 });
      await run(node, [p]);
      const rulesDir = `${node.root}/etc/polkit-1/rules.d`;
      // polkitd sees svc's directory as /etc/polkit-1/rules.d through a private bind mount.
      for (let i = 0; i < 50 && !(await Deno.stat(socket).then(() => true, () => false)); i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
      const daemon = new Deno.Command("unshare", {
        args: [
          "-m",
          "sh",
          "-c",
          `mount --bind "$0" /etc/polkit-1/rules.d && exec /usr/lib/polkit-1/polkitd --no-debug`,
          rulesDir,
        ],
        env,
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      children.push(daemon);
      const daemonOutput = daemon.output().then((o) =>
        new TextDecoder().decode(o.stdout) + new TextDecoder().decode(o.stderr)
      );
      const sleeper = new Deno.Command("setpriv", {
        args: ["--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "300"],
        stdout: "null",
        stderr: "null",
      }).spawn();
      children.push(sleeper);
      const pkcheck = async (action: string) => {
        const out = await new Deno.Command("timeout", {
          args: ["20", "pkcheck", "--action-id", action, "--process", String(sleeper.pid)],
          env,
          stdout: "piped",
          stderr: "piped",
        }).output();
        return out.code;
      };
      let ready = false;
      for (let i = 0; i < 60 && !ready; i++) {
        const out = await new Deno.Command("timeout", {
          args: ["3", "pkaction"],
          env,
          stdout: "piped",
          stderr: "null",
        }).output();
        ready = out.success && new TextDecoder().decode(out.stdout).includes("org.freedesktop");
        if (!ready) await new Promise((r) => setTimeout(r, 200));
      }
      if (!ready) {
        daemon.kill("SIGTERM");
        assert.fail(`polkitd did not answer on the private bus: ${await daemonOutput}`);
      }
      assert.equal(await pkcheck("org.freedesktop.hostname1.set-hostname"), 0, "YES for nobody");
      assert.equal(await pkcheck("org.freedesktop.login1.reboot"), 1, "NO for everyone");
      assert.notEqual(
        await pkcheck("org.freedesktop.hostname1.set-static-hostname"),
        0,
        "defaults elsewhere",
      );

      // The agent's own compliance probe (pkcheck of a process started as the rule's user) agrees.
      const runCmd = async (cmd: string, args: string[]) => {
        const out = await new Deno.Command("timeout", {
          args: ["20", cmd, ...args],
          env,
          stdout: "piped",
          stderr: "piped",
        }).output();
        return {
          code: out.code,
          stdout: new TextDecoder().decode(out.stdout),
          stderr: new TextDecoder().decode(out.stderr),
        };
      };
      const nobody = { uid: 65534, gid: 65534 };
      assert.equal(pkcheckSubject((p.typed as PolkitPolicy).rules[0]), "nobody");
      assert.equal(pkcheckSubject((p.typed as PolkitPolicy).rules[1]), "nobody");
      assert.equal(await pkcheckAs(runCmd, nobody, "org.freedesktop.hostname1.set-hostname"), "yes");
      assert.equal(await pkcheckAs(runCmd, nobody, "org.freedesktop.login1.reboot"), "no");
      assert.equal(
        await pkcheckAs(runCmd, nobody, "org.freedesktop.hostname1.set-static-hostname"),
        "challenge_keep",
      );
      const odd = await pkcheckAs(runCmd, nobody, 'x"; id; "');
      assert.ok(odd === "no" || typeof odd === "object", "an odd action id stays one argument");

      // pkaction lists exactly the actions the agent's catalogue reports.
      const listed = new TextDecoder().decode(
        (await new Deno.Command("timeout", { args: ["20", "pkaction"], env, stdout: "piped", stderr: "null" })
          .output()).stdout,
      ).split("\n").filter((l) => l.trim()).sort();
      const scanned = (await scanPolkitActions(node.fs))!;
      assert.deepEqual(scanned.map((a) => a.actionId).sort(), listed);
      // `pkaction --verbose` (what the agent reports on a real node) says the same, defaults included.
      const verbose = parsePkactionVerbose(new TextDecoder().decode(
        (await new Deno.Command("timeout", {
          args: ["20", "pkaction", "--verbose"],
          env,
          stdout: "piped",
          stderr: "null",
        }).output()).stdout,
      ));
      const defaults = (
        a: { actionId: string; defaultAny: string; defaultInactive: string; defaultActive: string },
      ) => `${a.actionId} ${a.defaultAny}/${a.defaultInactive}/${a.defaultActive}`;
      assert.deepEqual(verbose.map(defaults), scanned.map(defaults));
      assert.ok(verbose.every((a) => a.description !== ""), "descriptions parsed");
    } finally {
      for (const child of children.reverse()) {
        try {
          child.kill("SIGTERM");
        } catch {
          // already gone
        }
        await child.status.catch(() => {});
      }
      await Deno.remove(base, { recursive: true });
      await node.cleanup();
    }
  },
});

Deno.test("polkit catalogue: reported once, again only when the actions directory changes", async () => {
  const node = await polkitNode();
  try {
    const reporter = new PolkitCatalogueReporter();
    const sent: string[][] = [];
    const send = (actions: { actionId: string }[]) => {
      sent.push(actions.map((a) => a.actionId));
      return Promise.resolve();
    };
    const runner = new Runner();
    assert.equal(await reporter.reportIfChanged(node.fs, runner, send), "sent");
    assert.equal(await reporter.reportIfChanged(node.fs, runner, send), "unchanged");
    await Deno.writeTextFile(
      `${node.root}/usr/share/polkit-1/actions/org.example.test.policy`,
      `<?xml version="1.0" encoding="UTF-8"?>
<policyconfig><vendor>Example</vendor><action id="org.example.test.run"><description>Run</description>
<defaults><allow_any>no</allow_any><allow_inactive>no</allow_inactive><allow_active>auth_admin</allow_active></defaults>
</action></policyconfig>
`,
    );
    assert.equal(await reporter.reportIfChanged(node.fs, runner, send), "sent");
    assert.equal(sent.length, 2);
    assert.ok(sent[1].includes("org.example.test.run"));
    // A failed send is tried again next time.
    await Deno.remove(`${node.root}/usr/share/polkit-1/actions/org.example.test.policy`);
    await assert.rejects(
      reporter.reportIfChanged(node.fs, runner, () => Promise.reject(new Error("offline"))),
    );
    assert.equal(await reporter.reportIfChanged(node.fs, runner, send), "sent");
  } finally {
    await node.cleanup();
  }
  const text = `org.example.a:
  description:       Do A
  message:           Authentication is required to do A
  vendor:            Example
  vendor_url:        https://example.org
  icon:
  implicit any:      no
  implicit inactive: auth_admin
  implicit active:   yes

org.example.b:
  description:       Do B
  implicit any:      auth_admin_keep
`;
  const parsed = parsePkactionVerbose(text);
  assert.deepEqual(
    parsed.map((a) => [a.actionId, a.description, a.defaultAny, a.defaultInactive, a.defaultActive]),
    [
      ["org.example.a", "Do A", "no", "auth_admin", "yes"],
      ["org.example.b", "Do B", "auth_admin_keep", "", ""],
    ],
  );
});
