/**
 * Privilege enforcer: in a temp root, the sudoers file (mode 0440, checked by the real visudo before it lands) and
 * the polkit administrator rule are written, merged per principal, removed with the last policy, left alone by the
 * Polkit type (and the Polkit type's files by it); sudo missing is INAPPLICABLE; hostile names forced past the
 * server are refused before anything lands. Then, in a private mount namespace with the machine's real sudo and a
 * private polkitd (tests/helpers/privilege_child.ts), `sudo -l` and polkit's own text agent show the grants and
 * revocations in effect, and a configuration visudo refuses (another admin's broken drop-in) puts svc's previous
 * file back and reports visudo's words.
 */
import assert from "node:assert/strict";
import { create, toJsonString } from "@bufbuild/protobuf";
import { PrivilegePolicySchema } from "../../shared/gen/svc/policy/v1/privilege_pb.ts";
import { PolkitPolicySchema } from "../../shared/gen/svc/policy/v1/polkit_pb.ts";
import { privilegeEnforcer } from "../../agent/enforcers/privilege.ts";
import { parseOfferedAdmins } from "../../agent/enforcers/privilege/polkit_admins.ts";
import { vetSudoers } from "../../agent/enforcers/privilege/sudoers.ts";
import { polkitEnforcer } from "../../agent/enforcers/polkit.ts";
import { Runner } from "../../agent/runner.ts";
import type { CachedPolicy, Enforcer } from "../../agent/sync/types.ts";
import { POLKIT_ADMIN_RULES_PATH } from "../../shared/polkit_js.ts";
import { SUDOERS_PATH } from "../../shared/privilege_rules.ts";
import { nodeTest, policyMaker, syncWith, type TempNode, tempNode } from "./helpers.ts";
import { HOSTILE_STRINGS, SUDOERS_HOSTILE_STRINGS } from "../helpers/hostile_strings.ts";
import type { PrivilegeStepResult } from "../helpers/privilege_child.ts";

const HAS_VISUDO = (await new Runner().which("visudo")) !== undefined;
if (!HAS_VISUDO) console.warn("privilege tests skipped: visudo is missing (apt-get install sudo)");

const policy = policyMaker(PrivilegePolicySchema, "Privilege", "pv", (id) => `privilege ${id}`);

const DEBIAN_SUDOERS =
  "Defaults\tenv_reset\nroot\tALL=(ALL:ALL) ALL\n%sudo\tALL=(ALL:ALL) ALL\n@includedir /etc/sudoers.d\n";

async function privilegeNode(options: { sudo?: boolean } = {}): Promise<TempNode> {
  const node = await tempNode({ firefox: false, original: null });
  await Deno.mkdir(`${node.root}/etc/sudoers.d`, { recursive: true });
  await Deno.mkdir(`${node.root}/etc/polkit-1/rules.d`, { recursive: true });
  if (options.sudo ?? true) await Deno.writeTextFile(`${node.root}/etc/sudoers`, DEBIAN_SUDOERS);
  return node;
}

const run = (node: TempNode, policies: CachedPolicy[], enforcers: Enforcer[] = [privilegeEnforcer]) =>
  syncWith(node, enforcers, policies);

const read = (node: TempNode, path: string) =>
  Deno.readTextFile(`${node.root}${path}`).catch(() => undefined);

nodeTest(
  "privilege: sudoers (0440, visudo-checked) and the polkit admin rule land merged; the last policy removes them",
  { make: privilegeNode, ignore: !HAS_VISUDO },
  async (node) => {
    const high = policy({
      entries: [{ name: "alice", user: "alice", effect: 2 }, {
        group: "helpdesk",
        effect: 1,
        sudoNopasswd: true,
      }],
    }, { priority: 10, name: "high" });
    const low = policy({ entries: [{ user: "alice", effect: 1 }, { user: "bob", effect: 1 }] }, {
      priority: 1,
    });
    const { reports } = await run(node, [high, low]);
    const sudoers = await read(node, SUDOERS_PATH);
    assert.ok(sudoers, "the sudoers file is written");
    assert.deepEqual(sudoers.split("\n").filter((l) => l && !l.startsWith("#")), [
      "%helpdesk ALL=(ALL:ALL) NOPASSWD: ALL",
      "bob ALL=(ALL:ALL) ALL",
      "alice ALL=(ALL:ALL) !ALL",
    ]);
    assert.equal((await Deno.stat(`${node.root}${SUDOERS_PATH}`)).mode! & 0o777, 0o440);
    const polkit = await read(node, POLKIT_ADMIN_RULES_PATH);
    assert.match(polkit ?? "", /return \["unix-group:helpdesk", "unix-user:bob", "unix-group:sudo"\];/);
    assert.equal(reports.get(high.id)?.status, "COMPLIANT", JSON.stringify(reports.get(high.id)));
    const lowReport = reports.get(low.id)!;
    const aliceItem = lowReport.items.find((i) => i.key === "entries[0]")!;
    assert.equal(aliceItem.status, "INAPPLICABLE");
    assert.match(
      aliceItem.message,
      /overridden by policy "high" \(priority 10\), which revokes user alice/,
    );

    // The Polkit type's stray sweep leaves the Privilege file alone, and this type leaves the Polkit type's.
    const pk = create(PolkitPolicySchema, {
      rules: [{ name: "r", actionIds: ["org.example.a"], result: 2 }],
    });
    const polkitPolicy: CachedPolicy = {
      id: "pk-1",
      name: "pk",
      type: "Polkit",
      version: 1,
      priority: 0,
      content: toJsonString(PolkitPolicySchema, pk),
      typed: pk,
    };
    await run(node, [high, low, polkitPolicy], [privilegeEnforcer, polkitEnforcer]);
    await run(node, [polkitPolicy], [privilegeEnforcer, polkitEnforcer]);
    assert.equal(
      await read(node, SUDOERS_PATH),
      undefined,
      "the last Privilege policy gone: sudoers file removed",
    );
    assert.equal(await read(node, POLKIT_ADMIN_RULES_PATH), undefined);
    const left = [...Deno.readDirSync(`${node.root}/etc/polkit-1/rules.d`)].map((e) => e.name);
    assert.equal(left.length, 1, `the Polkit policy's own file stays: ${left}`);
  },
);

Deno.test({
  name: "privilege: an original drop-in of the same name is backed up and put back; no sudo is INAPPLICABLE",
  ignore: !HAS_VISUDO,
  async fn() {
    const node = await privilegeNode();
    try {
      await Deno.writeTextFile(`${node.root}${SUDOERS_PATH}`, "# someone else's\n", { mode: 0o440 });
      await run(node, [policy({ localSudoGroupNotAdmin: true })]);
      assert.match(await read(node, SUDOERS_PATH) ?? "", /^%sudo ALL=\(ALL:ALL\) !ALL$/m);
      await run(node, []);
      assert.equal(await read(node, SUDOERS_PATH), "# someone else's\n");
    } finally {
      await node.cleanup();
    }
    const bare = await privilegeNode({ sudo: false });
    try {
      const p = policy({ entries: [{ user: "alice", effect: 1 }] });
      const { reports } = await run(bare, [p]);
      assert.equal(reports.get(p.id)?.status, "INAPPLICABLE");
      assert.match(reports.get(p.id)!.message, /sudo is not installed on this node/);
      assert.equal(await read(bare, SUDOERS_PATH), undefined);
    } finally {
      await bare.cleanup();
    }
  },
});

nodeTest("privilege: hostile names forced past the server are refused by the agent; nothing lands", {
  make: privilegeNode,
  ignore: !HAS_VISUDO,
}, async (node) => {
  const policies: CachedPolicy[] = [];
  for (const h of [...HOSTILE_STRINGS, ...SUDOERS_HOSTILE_STRINGS]) {
    for (const value of [h.value, `alice${h.value}`]) {
      if (/^[A-Za-z0-9_][A-Za-z0-9_.@-]*$/.test(value) && !/^[A-Z][A-Z0-9_]*$/.test(value)) continue;
      // The server's parse, as the stream would carry it, bypassing the server's checks.
      const message = create(PrivilegePolicySchema, { entries: [{ user: value, effect: 1 }] });
      policies.push({
        id: `h-${policies.length}`,
        name: h.name,
        type: "Privilege",
        version: 1,
        priority: 0,
        content: "{}",
        typed: message,
      });
    }
  }
  const { reports } = await run(node, policies);
  const notRefused = policies.filter((p) => reports.get(p.id)?.status !== "ERROR");
  assert.deepEqual(notRefused.map((p) => `${p.name}: ${JSON.stringify(reports.get(p.id))}`), []);
  for (const p of policies) {
    assert.match(reports.get(p.id)!.message, /policy content rejected by the agent/);
  }
  assert.equal(await read(node, SUDOERS_PATH), undefined, "no sudoers file from refused content");
  const vetted = await vetSudoers(
    { runner: new Runner() },
    "alice ALL=(ALL:ALL) ALL\nbob, ALL=(ALL) ALL\n",
  );
  assert.match(vetted ?? "", /visudo refused the sudoers file, nothing was written: .*syntax error/);
});

Deno.test("privilege: pkcheck's text agent output names the offered administrators", () => {
  assert.deepEqual(
    parseOfferedAdmins(
      "\x1b[1;31m==== AUTHENTICATING FOR org.x ====\r\n\x1b[0mAuthentication is required\r\n" +
        "Multiple identities can be used for authentication:\r\n 1.  Alice Smith (alice)\r\n 2.  bob\r\n" +
        "Choose identity to authenticate as (1-2): ",
    ),
    ["alice", "bob"],
  );
  assert.deepEqual(parseOfferedAdmins("==== AUTHENTICATING ====\nAuthenticating as: root\nPassword: "), [
    "root",
  ]);
  assert.equal(parseOfferedAdmins("Error checking for authorization"), undefined);
});

/** Root, unshare, sudo, polkitd and dbus-daemon: the real thing in a private mount namespace. */
async function realUnavailable(): Promise<string | undefined> {
  if (Deno.uid() !== 0) return "not root (private mount namespace)";
  for (
    const tool of ["/usr/bin/sudo", "/usr/sbin/visudo", "/usr/lib/polkit-1/polkitd", "/usr/bin/dbus-daemon"]
  ) {
    if (!(await Deno.stat(tool).then(() => true, () => false))) {
      return `${tool} is missing (apt-get install sudo polkitd)`;
    }
  }
  for (const dir of ["/etc/sudoers.d", "/etc/polkit-1/rules.d"]) {
    if (!(await Deno.stat(dir).then((s) => s.isDirectory, () => false))) return `${dir} is missing`;
  }
  return undefined;
}
const REAL = await realUnavailable();
if (REAL) console.warn(`real sudo/polkit privilege test skipped: ${REAL}`);

Deno.test({
  name: "privilege: the real sudo and polkitd (private mount namespace) do what the merge says; a broken " +
    "configuration puts the previous file back with visudo's words",
  ignore: REAL !== undefined,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "svc-privilege-" });
    try {
      await Deno.chmod(dir, 0o755);
      await Deno.mkdir(`${dir}/rules.d`, { mode: 0o755 });
      // The test's accounts, beside the machine's own, seen only inside the namespace.
      const passwd = await Deno.readTextFile("/etc/passwd");
      const group = (await Deno.readTextFile("/etc/group")).split("\n").filter(Boolean).map((l) =>
        l.startsWith("sudo:") ? `${l}${l.endsWith(":") ? "" : ","}carol` : l
      ).join("\n");
      await Deno.writeTextFile(
        `${dir}/passwd`,
        `${passwd.trimEnd()}\nalice:x:4101:4101::/nonexistent:/usr/sbin/nologin\n` +
          "bob:x:4102:4102::/nonexistent:/usr/sbin/nologin\ncarol:x:4103:4103::/nonexistent:/usr/sbin/nologin\n" +
          "dave:x:4104:4104::/nonexistent:/usr/sbin/nologin\n",
      );
      await Deno.writeTextFile(
        `${dir}/group`,
        `${group}\nalice:x:4101:\nbob:x:4102:\ncarol:x:4103:\ndave:x:4104:\nhelpdesk:x:4200:bob\n`,
      );
      await Deno.writeTextFile(
        `${dir}/bus.conf`,
        `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>system</type><listen>unix:path=${dir}/bus.sock</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow receive_sender="*"/><allow eavesdrop="true"/><allow own="*"/><allow user="*"/></policy></busconfig>`,
      );
      const grant = policy({
        entries: [
          { name: "alice", user: "alice", effect: 1, sudoNopasswd: true },
          { name: "helpdesk", group: "helpdesk", effect: 1 },
          { name: "dave", user: "dave", effect: 2 },
        ],
        localSudoGroupNotAdmin: true,
      }, { id: "grant", name: "admins", priority: 10 });
      const more = policy({ entries: [{ user: "dave", effect: 1 }] }, { id: "more", priority: 1 });
      const carol = policy({ entries: [{ user: "carol", effect: 1 }] }, { id: "carol", priority: 20 });
      const ask = ["alice", "bob", "carol", "dave"];
      const broken = "/etc/sudoers.d/other-admin";
      await Deno.writeTextFile(
        `${dir}/scenario.json`,
        JSON.stringify([
          { policies: [grant, more], ask },
          { policies: [grant, carol], foreign: { [broken]: "carol ALL=(ALL) ALL,\n" }, ask },
          { policies: [], foreign: { [broken]: null }, ask },
        ]),
      );
      const helper = new URL("../helpers/privilege_child.ts", import.meta.url).pathname;
      const out = await new Deno.Command("unshare", {
        args: [
          "-m",
          "sh",
          "-c",
          'mount --make-rprivate / && mount -t tmpfs -o mode=755 tmpfs /etc/sudoers.d && mount --bind "$1/rules.d" ' +
          '/etc/polkit-1/rules.d && mount --bind "$1/passwd" /etc/passwd && mount --bind "$1/group" /etc/group && ' +
          'exec "$0" run -A --quiet "$2" "$1" "$1/scenario.json"',
          Deno.execPath(),
          dir,
          helper,
        ],
        env: { DBUS_SYSTEM_BUS_ADDRESS: `unix:path=${dir}/bus.sock`, NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stdout = new TextDecoder().decode(out.stdout);
      const stderr = new TextDecoder().decode(out.stderr);
      assert.ok(out.success, `child failed: ${stderr}`);
      const [first, second, third] = stdout.trim().split("\n").map((l) =>
        JSON.parse(l) as PrivilegeStepResult
      );

      // 1. Grants and revocations as sudo sees them (exit 0: may run /usr/bin/true as root; 1: may not).
      assert.deepEqual(first.sudo, { alice: 0, bob: 0, carol: 1, dave: 1 }, JSON.stringify(first.reports));
      assert.equal(first.modes[SUDOERS_PATH], 0o440);
      assert.equal(first.visudo, 0, "visudo -c passes with svc's file");
      const grantReport = first.reports.grant;
      assert.equal(grantReport.status, "COMPLIANT", JSON.stringify(grantReport, null, 1));
      const keys = grantReport.items.map((i) => i.key);
      for (const key of ["entries[0].sudo:alice", "entries[1].sudo:bob", "entries[2].sudo:dave"]) {
        assert.ok(keys.includes(key), `${key} in ${keys}`);
      }
      assert.ok(keys.includes("local_sudo_group_not_admin.sudo:carol"), `${keys}`);
      // polkitd offers exactly the administrators: alice by name, bob through helpdesk; carol's sudo group is out.
      const pk = grantReport.items.filter((i) => /\.pkcheck:/.test(i.key));
      assert.ok(pk.length >= 3, `polkit was asked: ${JSON.stringify(grantReport.items)}`);
      assert.ok(pk.every((i) => i.status === "COMPLIANT"), JSON.stringify(pk));
      assert.match(pk.find((i) => i.key === "entries[0].pkcheck:alice")!.message, /offers alice/);
      assert.match(
        pk.find((i) => i.key === "local_sudo_group_not_admin.pkcheck:carol")!.message,
        /does not offer/,
      );
      assert.equal(
        first.reports.more.status,
        "INAPPLICABLE",
        "dave's allow loses to the higher priority's deny",
      );

      // 2. Another admin's broken drop-in: svc's new file is refused, the previous one is back, visudo's words.
      assert.equal(second.reports.grant.status, "ERROR");
      assert.match(second.reports.grant.message, /visudo -c refused the configuration.*other-admin/);
      assert.match(second.reports.grant.message, /previous sudoers file is back/);
      assert.equal(second.files[SUDOERS_PATH], first.files[SUDOERS_PATH], "svc's previous file stays");

      // 3. No policy: svc's files are gone and the distribution's rules apply again (carol is in sudo).
      assert.equal(third.files[SUDOERS_PATH], null);
      assert.equal(third.files[POLKIT_ADMIN_RULES_PATH], null);
      assert.deepEqual(third.sudo, { alice: 1, bob: 1, carol: 0, dave: 1 });
      assert.equal(third.visudo, 0);
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
