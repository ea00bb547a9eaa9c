/**
 * Firewalld enforcer against the real `firewall-offline-cmd` (Debian firewalld) on a temp root: what svc
 * writes passes `--check-config` and lists back as intended; several policies of one zone combine by the
 * documented rule; parts of a zone svc does not manage survive; a combination firewalld refuses is rolled
 * back with nothing changed; hostile values forced past the server never reach a file.
 */
import assert from "node:assert/strict";
import { FirewalldPolicySchema } from "../../shared/gen/svc/policy/v1/firewalld_pb.ts";
import { firewalldType } from "../../shared/policy_types/firewalld.ts";
import { firewalldEnforcer, isOwnZone } from "../../agent/enforcers/firewalld.ts";
import type { CachedPolicy } from "../../agent/sync/types.ts";
import { parseXml } from "../../agent/xml.ts";
import { nodeTest, policyMaker, syncWith, type TempNode, tempNode } from "./helpers.ts";
import { HOSTILE_STRINGS } from "../helpers/hostile_strings.ts";

const TOOL = new Deno.Command("firewall-offline-cmd", { args: ["--version"] }).outputSync().success;
const skip = !TOOL;
if (skip) {
  console.warn("firewalld tests skipped: firewall-offline-cmd is not installed (apt-get install firewalld)");
}

const policy = policyMaker(FirewalldPolicySchema, "Firewalld", "fw", (id) => `firewall ${id}`);

async function firewalldNode(options: { stockZones?: boolean } = {}): Promise<TempNode> {
  const node = await tempNode({ firefox: false, original: null });
  await Deno.mkdir(`${node.root}/etc/firewalld/zones`, { recursive: true });
  await Deno.copyFile("/etc/firewalld/firewalld.conf", `${node.root}/etc/firewalld/firewalld.conf`);
  if (options.stockZones) {
    await Deno.mkdir(`${node.root}/usr/lib/firewalld`, { recursive: true });
    for (const dir of ["zones", "services", "icmptypes", "ipsets", "helpers", "policies"]) {
      const from = `/usr/lib/firewalld/${dir}`;
      const to = `${node.root}/usr/lib/firewalld/${dir}`;
      await Deno.mkdir(to, { recursive: true });
      if (!(await Deno.stat(from).catch(() => undefined))?.isDirectory) continue;
      for await (const e of Deno.readDir(from)) {
        if (e.isFile) await Deno.copyFile(`${from}/${e.name}`, `${to}/${e.name}`);
      }
    }
  }
  return node;
}

const run = (node: TempNode, policies: CachedPolicy[]) => syncWith(node, [firewalldEnforcer], policies);

async function offline(node: TempNode, ...args: string[]): Promise<{ ok: boolean; out: string }> {
  const out = await new Deno.Command("firewall-offline-cmd", {
    args: ["--system-config", `${node.root}/etc/firewalld`, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    ok: out.success,
    out: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr),
  };
}

async function snapshotTree(dir: string): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for await (const e of Deno.readDir(dir)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) { for (const [k, v] of await snapshotTree(path)) files.set(k, v); }
    else files.set(path, await Deno.readTextFile(path));
  }
  return files;
}

nodeTest("firewalld: zone written, passes --check-config and lists back item by item", {
  make: firewalldNode,
  ignore: skip,
}, async (node) => {
  const p = policy({
    zones: [{
      name: "svcwork",
      target: 4,
      services: ["ssh", "https"],
      ports: [{ port: "443", protocol: "tcp" }, { port: "5000-6000", protocol: "udp" }],
      sourcePorts: [{ port: "53", protocol: "udp" }],
      protocols: ["gre"],
      icmpBlocks: ["echo-request"],
      icmpBlockInversion: true,
      masquerade: true,
      forwardPorts: [{ port: "80", protocol: "tcp", toPort: "8080" }],
      richRules: [
        'rule family="ipv4" source address="10.0.0.0/8" service name="ssh" log prefix="ssh in" level="info" limit value="3/m" accept',
      ],
      sources: ["10.20.0.0/16"],
      interfaces: ["eth7"],
      short: "Work & <more>",
      description: 'Line one "quoted" </zone>',
    }],
  });
  const { reports } = await run(node, [p]);
  const report = reports.get(p.id)!;
  assert.equal(report.status, "COMPLIANT", JSON.stringify(report, null, 1));
  assert.ok(report.message.includes("not running"), report.message);
  const keys = report.items.map((i) => i.key);
  for (
    const k of [
      "target",
      "service:ssh",
      "port:5000-6000/udp",
      "source-port:53/udp",
      "protocol:gre",
      "icmp-block:echo-request",
      "masquerade",
      "icmp-block-inversion",
      "forward-port:port=80:proto=tcp:toport=8080:toaddr=",
      "source:10.20.0.0/16",
      "interface:eth7",
      "short",
      "description",
    ]
  ) assert.ok(keys.includes(k), `missing item ${k}: ${keys}`);
  assert.ok(keys.some((k) => k.startsWith('rich rule:rule family="ipv4"')));

  const text = await Deno.readTextFile(`${node.root}/etc/firewalld/zones/svcwork.xml`);
  assert.ok(isOwnZone(text));
  const zone = parseXml(text);
  assert.equal(zone.attrs.target, "DROP");
  assert.equal(zone.children.find((c) => c.name === "short")?.text, "Work & <more>");
  assert.equal(zone.children.find((c) => c.name === "description")?.text, 'Line one "quoted" </zone>');
  assert.ok((await offline(node, "--check-config")).ok);
  const listed = (await offline(node, "--zone=svcwork", "--list-all")).out;
  assert.match(listed, /target: DROP/);
  assert.match(listed, /services: https ssh\n/);
  assert.match(
    listed,
    /rule family="ipv4" source address="10.0.0.0\/8" service name="ssh" log prefix="ssh in"/,
  );

  // Someone edits the zone behind svc's back: the next read-back sees it.
  await Deno.writeTextFile(
    `${node.root}/etc/firewalld/zones/svcwork.xml`,
    text.replace('<service name="https"/>', ""),
  );
  const listedAfter = (await offline(node, "--zone=svcwork", "--list-all")).out;
  assert.doesNotMatch(listedAfter, /https/);
});

nodeTest(
  "firewalld: several policies of one zone combine (union, OR, target by priority) and losers are told",
  { make: firewalldNode, ignore: skip },
  async (node) => {
    const high = policy({ zones: [{ name: "office", target: 4, services: ["ssh"], richRules: [] }] }, {
      id: "high",
      priority: 50,
    });
    const low = policy({
      zones: [{ name: "office", target: 2, services: ["ssh", "http"], masquerade: true }],
    }, { id: "low", priority: 10 });
    const { reports } = await run(node, [low, high]);
    const listed = (await offline(node, "--zone=office", "--list-all")).out;
    assert.match(listed, /target: DROP/);
    assert.match(listed, /services: http ssh\n/);
    assert.match(listed, /masquerade: yes/);
    assert.equal(reports.get("high")!.status, "COMPLIANT");
    const lowReport = reports.get("low")!;
    assert.equal(lowReport.status, "COMPLIANT", JSON.stringify(lowReport));
    const target = lowReport.items.find((i) => i.key === "target")!;
    assert.equal(target.status, "INAPPLICABLE");
    assert.match(target.message, /overridden by higher-priority policy .*\(high\).*DROP/);
    assert.equal(lowReport.items.find((i) => i.key === "service:http")!.status, "COMPLIANT");
  },
);

nodeTest(
  "firewalld: parts of an existing zone svc does not manage survive; the original returns when the policy goes",
  { make: () => firewalldNode({ stockZones: true }), ignore: skip },
  async (node) => {
    const original = `<?xml version="1.0" encoding="utf-8"?>
<zone>
  <short>Home</short>
  <description>Admin's own home zone</description>
  <service name="mdns"/>
  <interface name="wlan0"/>
  <forward/>
</zone>
`;
    const path = `${node.root}/etc/firewalld/zones/home.xml`;
    await Deno.writeTextFile(path, original);
    const p = policy({ zones: [{ name: "home", services: ["ssh"] }] });
    const { reports } = await run(node, [p]);
    assert.equal(reports.get(p.id)!.status, "COMPLIANT", JSON.stringify(reports.get(p.id)));
    const listed = (await offline(node, "--zone=home", "--list-all")).out;
    assert.match(listed, /services: ssh\n/, "svc owns the services of the zone");
    assert.match(listed, /interfaces: wlan0/, "interfaces svc does not set are kept");
    assert.match(listed, /forward: yes/);
    const zone = parseXml(await Deno.readTextFile(path));
    assert.equal(zone.children.find((c) => c.name === "short")?.text, "Home");

    // A second run over svc's own file keeps the original's parts (taken from the backup, not the file).
    const again = policy({ zones: [{ name: "home", services: ["https"] }] }, { id: p.id });
    await run(node, [again]);
    const listed2 = (await offline(node, "--zone=home", "--list-all")).out;
    assert.match(listed2, /services: https\n/);
    assert.match(listed2, /interfaces: wlan0/);

    await run(node, []);
    assert.equal(await Deno.readTextFile(path), original, "original restored byte for byte");
  },
);

nodeTest(
  "firewalld: a combination firewalld refuses is rolled back with nothing changed, ERROR with the tool's output",
  { make: firewalldNode, ignore: skip },
  async (node) => {
    const good = policy({ zones: [{ name: "lab", services: ["ssh"] }] }, { id: "good" });
    await run(node, [good]);
    const before = await snapshotTree(`${node.root}/etc/firewalld`);
    // A service name that is well-formed but unknown to firewalld: only firewalld itself can refuse it.
    const broken = policy({
      zones: [{ name: "lab", services: ["no-such-service-xyz"] }, { name: "lab2", services: ["ssh"] }],
    }, {
      id: "broken",
      priority: 5,
    });
    const { reports } = await run(node, [good, broken]);
    for (const id of ["good", "broken"]) {
      const r = reports.get(id)!;
      assert.equal(r.status, "ERROR", JSON.stringify(r));
      assert.match(r.message, /INVALID_SERVICE.*no-such-service-xyz/);
      assert.match(r.message, /previous files restored/);
    }
    assert.deepEqual(await snapshotTree(`${node.root}/etc/firewalld`), before, "nothing changed on disk");
    assert.ok((await offline(node, "--check-config")).ok);
  },
);

nodeTest(
  "firewalld: default zone set through firewalld.conf and restored; zone without name means that zone",
  { make: firewalldNode, ignore: skip },
  async (node) => {
    const conf = await Deno.readTextFile(`${node.root}/etc/firewalld/firewalld.conf`);
    const p = policy({ defaultZone: "svcdef", zones: [{ name: "", services: ["ssh"] }] });
    const { reports } = await run(node, [p]);
    assert.equal(reports.get(p.id)!.status, "COMPLIANT", JSON.stringify(reports.get(p.id)));
    assert.equal((await offline(node, "--get-default-zone")).out.split("\n")[0].trim(), "svcdef");
    assert.match((await offline(node, "--zone=svcdef", "--list-all")).out, /services: ssh/);
    await run(node, []);
    assert.equal(await Deno.readTextFile(`${node.root}/etc/firewalld/firewalld.conf`), conf);
    assert.equal(
      await Deno.stat(`${node.root}/etc/firewalld/zones/svcdef.xml`).then(() => true, () => false),
      false,
    );
  },
);

nodeTest("firewalld: no firewalld on the node → INAPPLICABLE, nothing written", {
  make: () => tempNode({ firefox: false, original: null }),
  ignore: skip,
}, async (node) => {
  const p = policy({ zones: [{ name: "public", services: ["ssh"] }] });
  const { reports } = await run(node, [p]);
  assert.equal(reports.get(p.id)!.status, "INAPPLICABLE");
  assert.match(reports.get(p.id)!.message, /firewalld is not installed/);
  assert.equal(await Deno.stat(`${node.root}/etc/firewalld`).then(() => true, () => false), false);
});

nodeTest("firewalld: hostile values forced past the server are refused by the agent, nothing written", {
  make: firewalldNode,
  ignore: skip,
}, async (node) => {
  const hostile = HOSTILE_STRINGS.filter((h) => !h.classes.includes("empty"));
  const cases: CachedPolicy[] = [];
  const valueOf = new Map<CachedPolicy, string>();
  for (const h of hostile) {
    // Raw content, no typed message: as if a compromised server sent it.
    const zone = (field: string, value: unknown) =>
      policy({}, { typed: false, content: JSON.stringify({ zones: [{ name: "pub", [field]: value }] }) });
    cases.push(zone("services", [`ssh${h.value}`]));
    cases.push(
      zone("rich_rules", [`rule family="ipv4" source address="10.0.0.1" log prefix="${h.value}" accept`]),
    );
    cases.push(zone("rich_rules", [`rule service name="ssh" accept ${h.value}`]));
    cases.push(zone("interfaces", [`eth0${h.value}`]));
    cases.push(
      policy({}, { typed: false, content: JSON.stringify({ zones: [{ name: `pub${h.value}` }] }) }),
    );
    for (const p of cases) if (!valueOf.has(p)) valueOf.set(p, h.value);
  }
  cases.push(policy({}, {
    typed: false,
    content: JSON.stringify({
      zones: [{ name: "pub", services: Array.from({ length: 5000 }, (_, i) => `s${i}`).concat("s1") }],
    }),
  }));
  // What the shared validator lets through must be inert: only name characters, nothing that can end
  // an attribute, an element or a line.
  const refused = cases.filter((p) => {
    let issues: unknown[];
    try {
      issues = firewalldType.validate(firewalldType.parse(p.content, { ignoreUnknownFields: true }));
    } catch {
      return true; // the parser's guards (NUL, size) refuse it already
    }
    if (issues.length === 0) {
      assert.match(valueOf.get(p) ?? "", /^[\x20-\x7e]*$/, `accepted: ${p.content.slice(0, 200)}`);
      assert.doesNotMatch(valueOf.get(p) ?? "", /[<>&`$\\"']/, `accepted: ${p.content.slice(0, 200)}`);
    }
    return issues.length > 0;
  });
  assert.ok(refused.length > cases.length * 0.9, `${refused.length} of ${cases.length} refused`);
  // One sync over all refused ones: each is judged on its own by the agent.
  const { reports } = await run(node, refused);
  for (const p of refused) {
    const r = reports.get(p.id)!;
    assert.equal(r.status, "ERROR", `${p.content.slice(0, 120)} → ${r.status} ${r.message}`);
    assert.match(r.message, /rejected by the agent/);
  }
  assert.deepEqual([...(await snapshotTree(`${node.root}/etc/firewalld/zones`)).keys()], []);
});

/** Root, unshare, dbus-daemon and firewalld are all here: a real running firewalld in private namespaces. */
async function runningFirewalldMissing(): Promise<string | undefined> {
  if (Deno.uid?.() !== 0) return "not root (firewalld needs root and private namespaces)";
  for (
    const tool of ["/usr/sbin/firewalld", "/usr/bin/dbus-daemon", "/usr/bin/unshare", "/usr/bin/firewall-cmd"]
  ) {
    if (!(await Deno.stat(tool).then(() => true, () => false))) return `${tool} is missing`;
  }
  return undefined;
}
const RUNNING = TOOL ? await runningFirewalldMissing() : "firewalld is not installed";
if (RUNNING) console.warn(`running-firewalld test skipped: ${RUNNING}`);

Deno.test({
  name:
    "firewalld running (private namespaces): reload after the check, runtime read-back, refusal leaves the runtime alone",
  ignore: RUNNING !== undefined,
  async fn() {
    const base = await Deno.makeTempDir({ prefix: "svc-fw-running-" });
    const children: Deno.ChildProcess[] = [];
    try {
      // The daemon drops to no other user, but the bus socket must be reachable for firewall-cmd.
      await Deno.chmod(base, 0o755);
      await Deno.mkdir(`${base}/etc/zones`, { recursive: true });
      await Deno.mkdir(`${base}/data`);
      await Deno.copyFile("/etc/firewalld/firewalld.conf", `${base}/etc/firewalld.conf`);
      const socket = `${base}/bus.sock`;
      await Deno.writeTextFile(
        `${base}/bus.conf`,
        `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>system</type><listen>unix:path=${socket}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow receive_sender="*"/>
<allow eavesdrop="true"/><allow own="*"/><allow user="*"/></policy></busconfig>`,
      );
      children.push(
        new Deno.Command("dbus-daemon", {
          args: [`--config-file=${base}/bus.conf`, "--nofork"],
          stdout: "null",
          stderr: "null",
        })
          .spawn(),
      );
      for (let i = 0; i < 100 && !(await Deno.stat(socket).then(() => true, () => false)); i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
      // Inside: /etc/firewalld is the temp configuration, /run is private, the network namespace is new.
      const script = `
        mount --bind "$1/etc" /etc/firewalld && mount -t tmpfs tmpfs /run || exit 90
        firewalld --nofork --nopid >"$1/firewalld.log" 2>&1 &
        fw=$!
        i=0; until firewall-cmd --state >/dev/null 2>&1; do i=$((i+1)); [ $i -gt 150 ] && exit 91; sleep 0.2; done
        "$2" run -A "$3" "$1/data"; rc=$?
        kill $fw; wait $fw
        exit $rc`;
      const child = new Deno.Command("unshare", {
        args: [
          "-n",
          "-m",
          "sh",
          "-c",
          script,
          "sh",
          base,
          Deno.execPath(),
          new URL("../helpers/firewalld_running_child.ts", import.meta.url).pathname,
        ],
        env: { DBUS_SYSTEM_BUS_ADDRESS: `unix:path=${socket}` },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const out = await child;
      const stdout = new TextDecoder().decode(out.stdout);
      const log = await Deno.readTextFile(`${base}/firewalld.log`).catch(() => "");
      assert.equal(out.code, 0, `child failed: ${new TextDecoder().decode(out.stderr)}\n${log}`);
      const result = JSON.parse(stdout.trim().split("\n").at(-1)!);
      assert.equal(result.good.status, "COMPLIANT", JSON.stringify(result.good));
      assert.match(result.good.message, /in the running firewalld/);
      assert.ok(result.reloads >= 1, "firewall-cmd --reload ran after the check");
      assert.match(result.goodListing, /target: DROP/);
      assert.match(result.goodListing, /services: https ssh\n/);
      assert.equal(result.broken.status, "ERROR");
      assert.match(result.broken.message, /INVALID_SERVICE/);
      assert.match(result.brokenListing, /services: https ssh\n/, "the runtime keeps the previous zone");
      assert.doesNotMatch(
        result.removedState,
        /svcrun/,
        "no policy: the zone svc created is gone after reload",
      );
    } finally {
      for (const c of children.reverse()) {
        try {
          c.kill("SIGTERM");
        } catch {
          // already gone
        }
        await c.status.catch(() => {});
      }
      await Deno.remove(base, { recursive: true });
    }
  },
});
