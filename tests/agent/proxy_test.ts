/**
 * The Proxy enforcer on a temp root that has everything a desktop reads a proxy from (an original
 * /etc/environment and dnf.conf, apt, GNOME's schemas, KDE Plasma, Firefox, Chromium), through the sync engine
 * with the real enforcers, read by the real programs: pam_env's format, `apt-config` (apt's own merge), dnf's own
 * configuration parser (python3-dnf), `gsettings` through a session profile (values and locks), `kreadconfig5`
 * under a user configuration that tries to override every key, and the browsers' policy files. Release puts
 * every original back byte for byte; a PAC URL leaves the environment, apt and dnf alone; merge by priority,
 * also against the browser types' own proxy settings; content forced past the server is refused; values the
 * rules let through with quotes and shell characters come back literally from every reader; every file is
 * 0644 and holds no credentials (the rules refuse them).
 */
import assert from "node:assert/strict";
import { create, toJsonString } from "@bufbuild/protobuf";
import { ProxyPolicySchema } from "../../shared/gen/svc/policy/v1/proxy_pb.ts";
import { DconfPolicySchema } from "../../shared/gen/svc/policy/v1/dconf_pb.ts";
import type { CachedPolicy, PolicyResult } from "../../agent/sync/types.ts";
import { Runner } from "../../agent/runner.ts";
import { parseEnvironment } from "../../agent/enforcers/proxy/system_files.ts";
import {
  engineFor,
  firefoxPolicy,
  nodeTest,
  policyMaker,
  readFirefoxFile,
  type TempNode,
  tempNode,
} from "./helpers.ts";

const HOST_SCHEMAS = "/usr/share/glib-2.0/schemas";
const have = async (cmd: string) =>
  (await new Deno.Command("sh", { args: ["-c", `command -v ${cmd}`], stdout: "null" }).output()).success;
const HAVE_TOOLS = await have("dconf") && await have("gsettings") && await have("kreadconfig5") &&
  await have("apt-config") &&
  await Deno.stat(`${HOST_SCHEMAS}/org.gnome.system.proxy.gschema.xml`).then(() => true, () => false);
const HAVE_DNF = await Deno.stat("/usr/lib/python3/dist-packages/dnf").then(() => true, () => false);
if (!HAVE_TOOLS) {
  console.warn(
    "Proxy tests skipped: need dconf-cli, gsettings-desktop-schemas, libkf5config-bin and apt (.ci/run)",
  );
}

const ORIGINAL_ENV = 'LANG=C.UTF-8\nhttp_proxy="http://old.example:1/"\n';
const ORIGINAL_DNF =
  "[main]\ngpgcheck=1\nproxy=http://old.example:1\ninstallonly_limit=3\n\n[extra]\nproxy=http://repo.example:2\n";

const proxyPolicy = policyMaker(ProxyPolicySchema, "Proxy", "proxy");

const MANUAL = {
  config: {
    case: "manual" as const,
    value: {
      http: { host: "proxy.example.com", port: 3128 },
      https: { host: "secure.example.com", port: 8443 },
    },
  },
  noProxy: [".corp.example", "intranet.example.com", "10.0.0.0/8"],
};

/** A node with everything that reads a proxy. */
async function desktopNode(): Promise<TempNode> {
  const node = await tempNode({ firefox: true, original: null });
  const root = node.root;
  await Deno.writeTextFile(`${root}/etc/environment`, ORIGINAL_ENV).catch(async () => {
    await Deno.mkdir(`${root}/etc`, { recursive: true });
    await Deno.writeTextFile(`${root}/etc/environment`, ORIGINAL_ENV);
  });
  await Deno.mkdir(`${root}/etc/apt/apt.conf.d`, { recursive: true });
  await Deno.mkdir(`${root}/etc/dnf`, { recursive: true });
  await Deno.writeTextFile(`${root}/etc/dnf/dnf.conf`, ORIGINAL_DNF);
  await Deno.mkdir(`${root}${HOST_SCHEMAS}`, { recursive: true });
  for (const name of ["org.gnome.system.proxy.gschema.xml", "org.gnome.desktop.enums.xml"]) {
    await Deno.copyFile(`${HOST_SCHEMAS}/${name}`, `${root}${HOST_SCHEMAS}/${name}`);
  }
  await Deno.mkdir(`${root}/usr/bin`, { recursive: true });
  await Deno.writeTextFile(`${root}/usr/bin/plasmashell`, "");
  await Deno.mkdir(`${root}/usr/lib/chromium`, { recursive: true });
  return node;
}

async function run(cmd: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const out = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" }).output();
  const text = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${text}${new TextDecoder().decode(out.stderr)}`);
  }
  return text.trim();
}

/** GSettings as a GNOME session of the node reads it (its user profile's system databases under the root). */
async function gsettings(node: TempNode, ...args: string[]): Promise<string> {
  const home = await Deno.makeTempDir({ prefix: "svc-proxy-home-" });
  try {
    const profile = await Deno.readTextFile(`${node.root}/etc/dconf/profile/user`);
    const lines = profile.split("\n").filter((l) => l).map((l) =>
      l.startsWith("system-db:") ? `file-db:${node.root}/etc/dconf/db/${l.slice(10)}` : l
    );
    await Deno.writeTextFile(`${home}/profile`, `${lines.join("\n")}\n`);
    return await run("gsettings", args, {
      DCONF_PROFILE: `${home}/profile`,
      XDG_CONFIG_HOME: home,
      HOME: home,
      GSETTINGS_BACKEND: "dconf",
      GSETTINGS_SCHEMA_DIR: HOST_SCHEMAS,
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}

/** kreadconfig5 for a user whose own kioslaverc tries to turn the proxy off. */
async function kread(node: TempNode, key: string): Promise<string> {
  const home = await Deno.makeTempDir({ prefix: "svc-proxy-kde-" });
  try {
    await Deno.mkdir(`${home}/.config`);
    await Deno.writeTextFile(
      `${home}/.config/kioslaverc`,
      `[Proxy Settings]\n${key}=user-value\nProxyType=0\n`,
    );
    return await run("kreadconfig5", ["--file", "kioslaverc", "--group", "Proxy Settings", "--key", key], {
      XDG_CONFIG_DIRS: `${node.root}/etc/xdg`,
      XDG_CONFIG_HOME: `${home}/.config`,
      HOME: home,
      QT_QPA_PLATFORM: "offscreen",
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}

/** apt's merged configuration of the node. */
async function aptConfig(node: TempNode, key: string): Promise<string> {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      `${dir}/apt.conf`,
      `Dir::Etc::Parts "${node.root}/etc/apt/apt.conf.d";\nDir::Etc::Main "${node.root}/etc/apt/apt.conf";\n`,
    );
    return await run("apt-config", ["shell", "V", key], { APT_CONFIG: `${dir}/apt.conf` });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** dnf's own reading of the node's dnf.conf. */
function dnfProxy(node: TempNode): Promise<string> {
  return run("/usr/bin/python3", [
    "-c",
    "import sys, dnf\nc = dnf.conf.Conf()\nc.config_file_path = sys.argv[1]\nc.read()\nprint(c.proxy)",
    `${node.root}/etc/dnf/dnf.conf`,
  ]);
}

function statuses(result: PolicyResult): Record<string, string> {
  return Object.fromEntries(result.items.map((i) => [i.key, i.status]));
}

async function modes(node: TempNode, paths: string[]): Promise<number[]> {
  return await Promise.all(paths.map(async (p) => (await Deno.stat(`${node.root}${p}`)).mode! & 0o777));
}

nodeTest(
  "proxy: a manual proxy reaches the environment, apt, dnf, GNOME, KDE and the browsers; release restores all",
  { make: desktopNode, ignore: !HAVE_TOOLS },
  async (node) => {
    const { engine, reports } = await engineFor(node);
    const policy = proxyPolicy(MANUAL, { name: "corp proxy" });
    engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: true });
    await engine.idle();
    const result = reports.get(policy.id)!;
    assert.equal(result.status, "COMPLIANT", JSON.stringify(result, null, 2));
    assert.deepEqual(statuses(result), {
      environment: "COMPLIANT",
      apt: "COMPLIANT",
      dnf: "COMPLIANT",
      GNOME: "COMPLIANT",
      KDE: "COMPLIANT",
      Firefox: "COMPLIANT",
      Chromium: "COMPLIANT",
    });

    const env = await Deno.readTextFile(`${node.root}/etc/environment`);
    assert.ok(env.startsWith(ORIGINAL_ENV), "the original lines stay, before svc's block");
    const vars = parseEnvironment(env);
    assert.equal(vars.get("http_proxy"), "http://proxy.example.com:3128/");
    assert.equal(vars.get("HTTPS_PROXY"), "http://secure.example.com:8443/");
    assert.equal(
      vars.get("no_proxy"),
      "localhost,127.0.0.0/8,::1,.corp.example,intranet.example.com,10.0.0.0/8",
    );
    assert.equal(vars.get("LANG"), "C.UTF-8");

    assert.equal(await aptConfig(node, "Acquire::http::Proxy"), "V='http://proxy.example.com:3128/'");
    assert.equal(await aptConfig(node, "Acquire::https::Proxy"), "V='http://secure.example.com:8443/'");
    assert.equal(await aptConfig(node, "Acquire::http::Proxy::intranet.example.com"), "V='DIRECT'");

    const dnfConf = await Deno.readTextFile(`${node.root}/etc/dnf/dnf.conf`);
    assert.match(dnfConf, /# replaced by svc's Proxy policy: proxy=http:\/\/old.example:1/);
    assert.match(dnfConf, /\[extra\]\nproxy=http:\/\/repo.example:2\n/, "other sections untouched");
    if (HAVE_DNF) assert.equal(await dnfProxy(node), "http://proxy.example.com:3128");

    assert.equal(await gsettings(node, "get", "org.gnome.system.proxy", "mode"), "'manual'");
    assert.equal(
      await gsettings(node, "get", "org.gnome.system.proxy.http", "host"),
      "'proxy.example.com'",
    );
    assert.equal(await gsettings(node, "get", "org.gnome.system.proxy.https", "port"), "8443");
    assert.equal(
      await gsettings(node, "get", "org.gnome.system.proxy", "ignore-hosts"),
      "['localhost', '127.0.0.0/8', '::1', '*.corp.example', 'intranet.example.com', '10.0.0.0/8']",
    );
    assert.equal(await gsettings(node, "writable", "org.gnome.system.proxy", "mode"), "false", "locked");

    assert.equal(await kread(node, "ProxyType"), "1");
    assert.equal(await kread(node, "httpProxy"), "http://proxy.example.com 3128");
    assert.equal(
      await kread(node, "NoProxyFor"),
      "localhost,127.0.0.0/8,::1,.corp.example,intranet.example.com,10.0.0.0/8",
    );

    const firefox = await readFirefoxFile(node) as { policies: { Proxy: Record<string, unknown> } };
    assert.deepEqual(firefox.policies.Proxy, {
      Locked: true,
      Mode: "manual",
      HTTPProxy: "proxy.example.com:3128",
      SSLProxy: "secure.example.com:8443",
      Passthrough: "localhost, 127.0.0.0/8, ::1, .corp.example, intranet.example.com, 10.0.0.0/8",
    });
    const chromium = JSON.parse(
      await Deno.readTextFile(`${node.root}/etc/chromium/policies/managed/svc_policies.json`),
    );
    assert.deepEqual(chromium, {
      ProxyMode: "fixed_servers",
      ProxyServer: "http=proxy.example.com:3128;https=secure.example.com:8443",
      ProxyBypassList: "localhost,127.0.0.0/8,[::1],*.corp.example,intranet.example.com,10.0.0.0/8",
    });

    const written = [
      "/etc/environment",
      "/etc/apt/apt.conf.d/80svc-proxy",
      "/etc/dnf/dnf.conf",
      "/etc/dconf/db/local.d/svc-proxy",
      "/etc/dconf/db/local.d/locks/svc-proxy",
      "/etc/dconf/profile/user",
      "/etc/xdg/kioslaverc",
    ];
    assert.deepEqual(await modes(node, written), written.map(() => 0o644));

    engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
    await engine.idle();
    assert.equal(await Deno.readTextFile(`${node.root}/etc/environment`), ORIGINAL_ENV);
    assert.equal(await Deno.readTextFile(`${node.root}/etc/dnf/dnf.conf`), ORIGINAL_DNF);
    for (const path of written.filter((p) => p !== "/etc/environment" && p !== "/etc/dnf/dnf.conf")) {
      assert.equal(await Deno.stat(`${node.root}${path}`).catch(() => null), null, `${path} removed`);
    }
    assert.equal(await aptConfig(node, "Acquire::http::Proxy"), "");
    assert.equal(await readFirefoxFile(node), undefined);
    // svc made the local database for its keys alone: the compiled database goes with them.
    assert.equal(await Deno.stat(`${node.root}/etc/dconf/db/local`).catch(() => null), null);
  },
);

nodeTest(
  "proxy: a PAC URL reaches GNOME, KDE and the browsers; the environment, apt and dnf are left alone",
  { make: desktopNode, ignore: !HAVE_TOOLS },
  async (node) => {
    const { engine, reports } = await engineFor(node);
    const url = "https://wpad.example.com/proxy.pac?site=a&x='b'";
    const policy = proxyPolicy({ config: { case: "pacUrl", value: url } });
    engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: true });
    await engine.idle();
    const result = reports.get(policy.id)!;
    assert.deepEqual(statuses(result), {
      environment: "INAPPLICABLE",
      apt: "INAPPLICABLE",
      dnf: "INAPPLICABLE",
      GNOME: "COMPLIANT",
      KDE: "COMPLIANT",
      Firefox: "COMPLIANT",
      Chromium: "COMPLIANT",
    });
    assert.equal(result.status, "COMPLIANT");
    assert.match(
      result.items[0].message,
      /the session environment cannot read a PAC file: set a manual proxy/,
    );
    assert.equal(await Deno.readTextFile(`${node.root}/etc/environment`), ORIGINAL_ENV);
    assert.equal(await Deno.readTextFile(`${node.root}/etc/dnf/dnf.conf`), ORIGINAL_DNF);
    assert.equal(await Deno.stat(`${node.root}/etc/apt/apt.conf.d/80svc-proxy`).catch(() => null), null);
    // Quotes and '&' in the URL come back literally from every reader.
    assert.equal(await gsettings(node, "get", "org.gnome.system.proxy", "mode"), "'auto'");
    assert.equal(await gsettings(node, "get", "org.gnome.system.proxy", "autoconfig-url"), `"${url}"`);
    assert.equal(await kread(node, "Proxy Config Script"), url);
    assert.equal(await kread(node, "ProxyType"), "2");
    const firefox = await readFirefoxFile(node) as { policies: { Proxy: Record<string, unknown> } };
    assert.deepEqual(firefox.policies.Proxy, { AutoConfigURL: url, Locked: true, Mode: "autoConfig" });
    const chromium = JSON.parse(
      await Deno.readTextFile(`${node.root}/etc/chromium/policies/managed/svc_policies.json`),
    );
    assert.deepEqual(chromium, { ProxyMode: "pac_script", ProxyPacUrl: url });
  },
);

nodeTest(
  "proxy: the highest priority wins whole; the browser types' own proxy keys merge with it by priority",
  { make: desktopNode, ignore: !HAVE_TOOLS },
  async (node) => {
    const { engine, reports } = await engineFor(node);
    const high = proxyPolicy(MANUAL, { priority: 10, name: "high" });
    const low = proxyPolicy({ config: { case: "pacUrl", value: "https://wpad.example.com/p.pac" } }, {
      priority: 1,
      name: "low",
    });
    const twin = proxyPolicy(MANUAL, { priority: 2, name: "twin" });
    // Firefox's own Proxy setting outranks the Proxy type in Firefox's file.
    const ff = firefoxPolicy({ proxy: { mode: "system", locked: true } }, { priority: 20, name: "ff" });
    for (const policy of [high, low, twin, ff]) {
      engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: false });
    }
    engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
    await engine.idle();

    const lowResult = reports.get(low.id)!;
    assert.equal(lowResult.status, "INAPPLICABLE");
    assert.match(lowResult.message, /overridden by higher-priority policy "high"/);
    const highResult = reports.get(high.id)!;
    assert.equal(statuses(highResult).Firefox, "INAPPLICABLE");
    assert.match(
      highResult.items.find((i) => i.key === "Firefox")!.message,
      /a higher-priority Firefox policy sets Proxy/,
    );
    assert.equal(highResult.status, "COMPLIANT", JSON.stringify(highResult));
    assert.deepEqual(
      statuses(reports.get(twin.id)!),
      statuses(highResult),
      "the same configuration shares the results",
    );
    assert.equal(reports.get(ff.id)!.status, "COMPLIANT");
    const firefox = await readFirefoxFile(node) as { policies: { Proxy: Record<string, unknown> } };
    assert.deepEqual(firefox.policies.Proxy, { Locked: true, Mode: "system" });
  },
);

nodeTest("proxy: content forced past the server is refused by the agent; nothing is written, no tool runs", {
  make: desktopNode,
  ignore: !HAVE_TOOLS,
}, async (node) => {
  const runner = new Runner();
  const { engine, reports } = await engineFor(node, { runner });
  const hostile = [
    { manual: { http: { host: "user:secret@proxy.example.com", port: 3128 } } },
    { manual: { http: { host: "proxy.example.com\nhttp_proxy=http://evil", port: 3128 } } },
    { manual: { http: { host: "proxy.example.com", port: 3128 } }, no_proxy: ['a"; rm -rf /'] },
    { pac_url: "https://wpad.example.com/p.pac\n[Proxy Settings]\nProxyType=0" },
    { pac_url: "https://u:p@wpad.example.com/p.pac" },
  ];
  for (const [i, content] of hostile.entries()) {
    const policy: CachedPolicy = {
      id: `hostile-${i}`,
      name: "hostile",
      type: "Proxy",
      version: 1,
      priority: 0,
      content: JSON.stringify(content),
    };
    engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: true });
    await engine.idle();
    const result = reports.get(policy.id)!;
    assert.equal(result.status, "ERROR", JSON.stringify(content));
    assert.match(
      result.message,
      /^policy content rejected by the agent: (manual\.http\.host|no_proxy\[0\]|pac_url): /,
    );
  }
  assert.equal(await Deno.readTextFile(`${node.root}/etc/environment`), ORIGINAL_ENV);
  assert.equal(await Deno.readTextFile(`${node.root}/etc/dnf/dnf.conf`), ORIGINAL_DNF);
  for (const path of ["/etc/apt/apt.conf.d/80svc-proxy", "/etc/xdg/kioslaverc", "/etc/dconf"]) {
    assert.equal(await Deno.stat(`${node.root}${path}`).catch(() => null), null, path);
  }
  assert.deepEqual(
    runner.history.map((c) => c.cmd).filter((c) => /dconf|kreadconfig|apt-config/.test(c)),
    [],
  );
});

nodeTest(
  "proxy: a Dconf policy and the Proxy policy share GNOME's local database; each comes and goes alone",
  { make: desktopNode, ignore: !HAVE_TOOLS },
  async (node) => {
    for await (const entry of Deno.readDir(HOST_SCHEMAS)) {
      if (entry.name.endsWith(".xml")) {
        await Deno.copyFile(`${HOST_SCHEMAS}/${entry.name}`, `${node.root}${HOST_SCHEMAS}/${entry.name}`);
      }
    }
    const { engine, reports } = await engineFor(node);
    const dconfMessage = create(DconfPolicySchema, {
      entries: [{
        schemaId: "org.gnome.desktop.screensaver",
        key: "lock-delay",
        value: "uint32 42",
        lock: true,
      }],
    });
    const dconf: CachedPolicy = {
      id: "dconf-1",
      name: "screensaver",
      type: "Dconf",
      version: 1,
      priority: 0,
      content: toJsonString(DconfPolicySchema, dconfMessage),
      typed: dconfMessage,
    };
    const proxy = proxyPolicy(MANUAL);
    // The Proxy type comes first and adds the profile line; the Dconf policy then relies on it.
    engine.handleEvent({ kind: "SNAPSHOT", policy: proxy, snapshotComplete: true });
    await engine.idle();
    engine.handleEvent({ kind: "SNAPSHOT", policy: dconf, snapshotComplete: false });
    engine.handleEvent({ kind: "SNAPSHOT", policy: proxy, snapshotComplete: true });
    await engine.idle();
    assert.equal(reports.get(dconf.id)!.status, "COMPLIANT", JSON.stringify(reports.get(dconf.id)));
    assert.equal(reports.get(proxy.id)!.status, "COMPLIANT", JSON.stringify(reports.get(proxy.id)));
    assert.equal(await gsettings(node, "get", "org.gnome.desktop.screensaver", "lock-delay"), "uint32 42");
    assert.equal(await gsettings(node, "get", "org.gnome.system.proxy", "mode"), "'manual'");

    engine.handleEvent({ kind: "SNAPSHOT", policy: dconf, snapshotComplete: true });
    await engine.idle();
    assert.equal(reports.get(dconf.id)!.status, "COMPLIANT", JSON.stringify(reports.get(dconf.id)));
    assert.equal(await gsettings(node, "get", "org.gnome.desktop.screensaver", "lock-delay"), "uint32 42");
    assert.equal(await gsettings(node, "get", "org.gnome.system.proxy", "mode"), "'none'");
    // And once the Dconf policy goes too, the profile is the node's own again (there was none).
    engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
    await engine.idle();
    assert.equal(await Deno.stat(`${node.root}/etc/dconf/profile/user`).catch(() => null), null);
  },
);

nodeTest("proxy: without apt, dnf, GNOME, KDE or browsers only the environment applies", {
  make: () => tempNode({ firefox: false, original: null }),
}, async (node) => {
  const { engine, reports } = await engineFor(node);
  const policy = proxyPolicy(MANUAL);
  engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: true });
  await engine.idle();
  const result = reports.get(policy.id)!;
  assert.deepEqual(statuses(result), {
    environment: "COMPLIANT",
    apt: "INAPPLICABLE",
    dnf: "INAPPLICABLE",
    GNOME: "INAPPLICABLE",
    KDE: "INAPPLICABLE",
  });
  assert.equal(result.status, "COMPLIANT");
  // There was no /etc/environment: svc's file is removed again on release.
  engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();
  assert.equal(await Deno.stat(`${node.root}/etc/environment`).catch(() => null), null);
});
