/**
 * The Dconf enforcer against the real `dconf` (dconf-cli) and Debian's real GSettings schemas copied into a
 * temp root: what svc writes compiles; a session profile that points at the compiled database reads the
 * merged values and honours the locks even over a user database that says otherwise; overridden keys,
 * missing schemas, wrong types and a failing `dconf update` are reported as the spec says; a tampered
 * keyfile is restored by the tamper watcher; hostile content never reaches a file.
 */
import assert from "node:assert/strict";
import { DconfPolicySchema } from "../../shared/gen/svc/policy/v1/dconf_pb.ts";
import { TamperWatcher } from "../../agent/tamper.ts";
import { dconfEnforcer } from "../../agent/enforcers/dconf.ts";
import {
  assertHostileRefused,
  engineFor,
  noWritesIO,
  policyMaker,
  type TempNode,
  tempNode,
  untilRestored,
  watchedEngine,
} from "./helpers.ts";

const HOST_SCHEMAS = "/usr/share/glib-2.0/schemas";
const haveDconf = await new Deno.Command("sh", { args: ["-c", "command -v dconf"] }).output().then((o) =>
  o.success
);
const haveSchemas = await Deno.stat(`${HOST_SCHEMAS}/org.gnome.desktop.screensaver.gschema.xml`).then(
  () => true,
  () => false,
);
const ignore = !haveDconf || !haveSchemas;
if (ignore) {
  console.warn(
    "dconf tests skipped: need the dconf command (Debian dconf-cli) and gsettings-desktop-schemas; .ci/run installs both",
  );
}

const dconfPolicy = policyMaker(DconfPolicySchema, "Dconf", "dconf");

async function gnomeNode(): Promise<TempNode> {
  const node = await tempNode({ firefox: false, original: null });
  await Deno.mkdir(`${node.root}${HOST_SCHEMAS}`, { recursive: true });
  for await (const entry of Deno.readDir(HOST_SCHEMAS)) {
    if (entry.name.endsWith(".xml") || entry.name.endsWith(".override")) {
      await Deno.copyFile(`${HOST_SCHEMAS}/${entry.name}`, `${node.root}${HOST_SCHEMAS}/${entry.name}`);
    }
  }
  return node;
}

async function run(cmd: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const out = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")}: ${text}`);
  return text.trim();
}

/** A user session: the node's user profile translated to paths under the root, plus a user database. */
async function session(node: TempNode, userKeyfile?: string) {
  const home = await Deno.makeTempDir({ prefix: "svc-dconf-home-" });
  const profile = await Deno.readTextFile(`${node.root}/etc/dconf/profile/user`);
  const lines = profile.split("\n").filter((l) => l).map((l) =>
    l.startsWith("system-db:") ? `file-db:${node.root}/etc/dconf/db/${l.slice(10)}` : l
  );
  await Deno.writeTextFile(`${home}/profile`, `${lines.join("\n")}\n`);
  if (userKeyfile) {
    await Deno.mkdir(`${home}/user.d`, { recursive: true });
    await Deno.mkdir(`${home}/dconf`, { recursive: true });
    await Deno.writeTextFile(`${home}/user.d/settings`, userKeyfile);
    await run("dconf", ["compile", `${home}/dconf/user`, `${home}/user.d`]);
  }
  const env = { DCONF_PROFILE: `${home}/profile`, XDG_CONFIG_HOME: home, HOME: home };
  return {
    read: (key: string) => run("dconf", ["read", key], env),
    gsettings: (...args: string[]) =>
      run("gsettings", args, { ...env, GSETTINGS_BACKEND: "dconf", GSETTINGS_SCHEMA_DIR: HOST_SCHEMAS }),
    cleanup: () => Deno.remove(home, { recursive: true }),
  };
}

Deno.test({
  name:
    "dconf: merged policies compile, a user session reads the winners and the locks hold over the user db",
  ignore,
  async fn() {
    const node = await gnomeNode();
    try {
      const { engine, reports, runner } = await engineFor(node);
      const high = dconfPolicy({
        entries: [
          { schemaId: "org.gnome.desktop.screensaver", key: "lock-delay", value: "300", lock: true },
          { schemaId: "org.gnome.desktop.interface", key: "gtk-theme", value: "'HighContrast'" },
        ],
      }, { priority: 20, name: "high" });
      const low = dconfPolicy({
        entries: [
          { schemaId: "org.gnome.desktop.screensaver", key: "lock-delay", value: "uint32 60", lock: true },
          { schemaId: "org.gnome.desktop.screensaver", key: "lock-enabled", value: "true", lock: true },
          { schemaId: "org.gnome.desktop.background", key: "picture-options", value: "'zoom'" },
          { schemaId: "org.example.not.installed", key: "thing", value: "true" },
        ],
      }, { priority: 10, name: "low" });
      engine.handleEvent({ kind: "SNAPSHOT", policy: high, snapshotComplete: false });
      engine.handleEvent({ kind: "SNAPSHOT", policy: low, snapshotComplete: true });
      await engine.idle();

      const keyfile = await Deno.readTextFile(`${node.root}/etc/dconf/db/local.d/svc-policies`);
      assert.match(
        keyfile,
        /\[org\/gnome\/desktop\/screensaver\]\nlock-delay=uint32 300\nlock-enabled=true\n/,
      );
      assert.doesNotMatch(keyfile, /not\/installed/);
      assert.equal(
        await Deno.readTextFile(`${node.root}/etc/dconf/profile/user`),
        "user-db:user\nsystem-db:local\n",
      );
      assert.ok(runner.history.some((c) => c.cmd === "dconf" && c.args[0] === "update" && c.result.success));
      assert.ok((await Deno.stat(`${node.root}/etc/dconf/db/local`)).isFile);

      const rh = reports.get(high.id)!;
      assert.equal(rh.status, "COMPLIANT", rh.message);
      assert.deepEqual(rh.items.map((i) => [i.key, i.status]), [["lock-delay", "COMPLIANT"], [
        "gtk-theme",
        "COMPLIANT",
      ]]);
      const rl = reports.get(low.id)!;
      const byKey = new Map(rl.items.map((i) => [i.key, i]));
      assert.equal(byKey.get("lock-delay")!.status, "INAPPLICABLE");
      assert.match(
        byKey.get("lock-delay")!.message,
        /higher-priority policy "high"; applied value: uint32 300/,
      );
      assert.equal(byKey.get("thing")!.status, "INAPPLICABLE");
      assert.match(byKey.get("thing")!.message, /not installed/);
      assert.equal(byKey.get("lock-enabled")!.status, "COMPLIANT");
      assert.equal(rl.status, "COMPLIANT", rl.message);

      // A user who set other values in their own database still gets the locked ones.
      const user = await session(
        node,
        "[org/gnome/desktop/screensaver]\nlock-delay=uint32 5\nlock-enabled=false\n\n[org/gnome/desktop/interface]\ngtk-theme='Adwaita'\n",
      );
      try {
        assert.equal(await user.read("/org/gnome/desktop/screensaver/lock-delay"), "uint32 300");
        assert.equal(await user.read("/org/gnome/desktop/screensaver/lock-enabled"), "true");
        // Not locked: the user's own value wins, as GNOME intends for defaults.
        assert.equal(await user.read("/org/gnome/desktop/interface/gtk-theme"), "'Adwaita'");
        assert.equal(
          await user.gsettings("get", "org.gnome.desktop.screensaver", "lock-delay"),
          "uint32 300",
        );
        assert.equal(
          await user.gsettings("writable", "org.gnome.desktop.screensaver", "lock-delay"),
          "false",
        );
        assert.equal(await user.gsettings("writable", "org.gnome.desktop.interface", "gtk-theme"), "true");
      } finally {
        await user.cleanup();
      }

      // Removing every policy removes svc's files and recompiles the database without them.
      engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
      await engine.idle();
      assert.equal(
        await Deno.stat(`${node.root}/etc/dconf/db/local.d/svc-policies`).catch(() => undefined),
        undefined,
      );
      assert.equal(await Deno.stat(`${node.root}/etc/dconf/profile/user`).catch(() => undefined), undefined);
    } finally {
      await node.cleanup();
    }
  },
});

Deno.test({
  name:
    "dconf: a value that does not fit the key's type, enum or range is refused per key; others still apply",
  ignore,
  async fn() {
    const node = await gnomeNode();
    try {
      const { engine, reports } = await engineFor(node);
      const p = dconfPolicy({
        entries: [
          { schemaId: "org.gnome.desktop.screensaver", key: "lock-delay", value: "'soon'" },
          { schemaId: "org.gnome.desktop.screensaver", key: "lock-delay", path: "", value: "1" },
          { schemaId: "org.gnome.desktop.background", key: "picture-options", value: "'sideways'" },
          { schemaId: "org.gnome.desktop.interface", key: "no-such-key", value: "true" },
        ].filter((_, i) => i !== 1),
      });
      engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
      await engine.idle();
      const r = reports.get(p.id)!;
      const byKey = new Map(r.items.map((i) => [i.key, i]));
      assert.equal(byKey.get("lock-delay")!.status, "ERROR");
      assert.match(byKey.get("lock-delay")!.message, /type u/);
      assert.equal(byKey.get("picture-options")!.status, "ERROR");
      assert.match(byKey.get("picture-options")!.message, /'zoom'/);
      assert.equal(byKey.get("no-such-key")!.status, "INAPPLICABLE");
      assert.equal(r.status, "ERROR");
    } finally {
      await node.cleanup();
    }
  },
});

Deno.test({
  name:
    "dconf: a failing dconf update leaves the previous database and files in force and reports dconf's message",
  ignore,
  async fn() {
    const node = await gnomeNode();
    try {
      const { engine, reports } = await engineFor(node);
      const first = dconfPolicy({
        entries: [{ schemaId: "org.gnome.desktop.screensaver", key: "lock-delay", value: "uint32 120" }],
      }, { id: "p1" });
      engine.handleEvent({ kind: "SNAPSHOT", policy: first, snapshotComplete: true });
      await engine.idle();
      assert.equal(reports.get("p1")!.status, "COMPLIANT", reports.get("p1")!.message);
      const keyfileBefore = await Deno.readTextFile(`${node.root}/etc/dconf/db/local.d/svc-policies`);
      const dbBefore = await Deno.readFile(`${node.root}/etc/dconf/db/local`);

      // Someone else's broken keyfile in the same database makes `dconf update` fail.
      await Deno.writeTextFile(`${node.root}/etc/dconf/db/local.d/01-broken`, "[org/x]\nthis is not a key\n");
      const second = dconfPolicy({
        entries: [{ schemaId: "org.gnome.desktop.screensaver", key: "lock-delay", value: "uint32 600" }],
      }, { id: "p1" });
      engine.handleEvent({ kind: "UPDATED", policy: second, snapshotComplete: false });
      await engine.idle();
      const r = reports.get("p1")!;
      assert.equal(r.status, "ERROR");
      assert.match(r.message, /dconf update failed: .*01-broken/);
      assert.equal(await Deno.readTextFile(`${node.root}/etc/dconf/db/local.d/svc-policies`), keyfileBefore);
      assert.deepEqual(await Deno.readFile(`${node.root}/etc/dconf/db/local`), dbBefore);
    } finally {
      await node.cleanup();
    }
  },
});

Deno.test({
  name: "dconf: a tampered keyfile is restored by the tamper watcher and recompiled",
  ignore,
  async fn() {
    const node = await gnomeNode();
    let watcher: TamperWatcher | undefined;
    try {
      const watched = await watchedEngine(node, { recordAtTamper: true });
      watcher = watched.watcher;
      const { engine, events } = watched;
      const p = dconfPolicy({
        entries: [{
          schemaId: "org.gnome.desktop.screensaver",
          key: "lock-delay",
          value: "uint32 42",
          lock: true,
        }],
      });
      engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
      await engine.idle();
      const path = `${node.root}/etc/dconf/db/local.d/svc-policies`;
      const written = await Deno.readTextFile(path);
      await new Promise((r) => setTimeout(r, 300));
      await Deno.writeTextFile(path, "[org/gnome/desktop/screensaver]\nlock-delay=uint32 0\n");
      await untilRestored(engine, path, written, () => events.length > 0);
      assert.deepEqual(events.map((e) => e.path), ["/etc/dconf/db/local.d/svc-policies"]);
      assert.equal(await Deno.readTextFile(path), written);
      const user = await session(node);
      try {
        assert.equal(await user.read("/org/gnome/desktop/screensaver/lock-delay"), "uint32 42");
      } finally {
        await user.cleanup();
      }
    } finally {
      await watcher?.close();
      await node.cleanup();
    }
  },
});

Deno.test({
  name:
    "dconf: content forced past the server (injection in key, value, db name) is refused; nothing is written",
  ignore,
  async fn() {
    const node = await gnomeNode();
    try {
      const { engine, reports, runner } = await engineFor(node);
      const hostile: Record<string, unknown>[] = [
        {
          entries: [{
            schema_id: "org.gnome.desktop.screensaver",
            key: "lock-delay",
            value: "1\n[org/evil]\nx=1",
          }],
        },
        { entries: [{ schema_id: "org.gnome.desktop.screensaver", key: "lock-delay]\n[x", value: "1" }] },
        { entries: [{ schema_id: "org.gnome.desktop.screensaver", key: "lock-delay", value: "'a" }] },
        { db_name: "../../../tmp/x", entries: [{ schema_id: "a.b", key: "k", value: "1" }] },
        { profile: "user/../../x", entries: [{ schema_id: "a.b", key: "k", value: "1" }] },
        {
          entries: [{ schema_id: "org.gnome.desktop.screensaver", path: "/a/../b/", key: "k", value: "1" }],
        },
        { entries: [{ schema_id: "org.gnome\u0000x", key: "k", value: "1" }] },
      ];
      await assertHostileRefused(engine, reports, "Dconf", hostile);
      assert.equal(await Deno.stat(`${node.root}/etc/dconf`).catch(() => undefined), undefined);
      assert.equal(await Deno.stat(`${node.root}/tmp`).catch(() => undefined), undefined);
      assert.ok(!runner.history.some((c) => c.cmd === "dconf"));
    } finally {
      await node.cleanup();
    }
  },
});

Deno.test({
  name: "dconf: no policy and no earlier file means no side effect at all",
  ignore,
  async fn() {
    const node = await gnomeNode();
    try {
      const { runner } = await engineFor(node);
      const result = await dconfEnforcer.sync([], noWritesIO(node, runner));
      assert.deepEqual(result, { policies: [], changed: [] });
      assert.equal(runner.history.length, 0);
    } finally {
      await node.cleanup();
    }
  },
});

Deno.test({
  name:
    "dconf: a gdm policy gets its own database and profile, keeping GDM's greeter defaults; profiles are extended",
  ignore,
  async fn() {
    const node = await gnomeNode();
    try {
      // GDM's read-only greeter database, as the gdm package ships it.
      const greeter = await Deno.makeTempDir();
      await Deno.mkdir(`${greeter}/d`);
      await Deno.writeTextFile(`${greeter}/d/greeter`, "[org/gnome/desktop/interface]\ncursor-size=48\n");
      await Deno.mkdir(`${node.root}/usr/share/gdm`, { recursive: true });
      await run("dconf", ["compile", `${node.root}/usr/share/gdm/greeter-dconf-defaults`, `${greeter}/d`]);
      await Deno.remove(greeter, { recursive: true });
      // An existing user profile with a site database keeps it, and svc's database goes in front of it.
      await Deno.mkdir(`${node.root}/etc/dconf/profile`, { recursive: true });
      await Deno.writeTextFile(`${node.root}/etc/dconf/profile/user`, "user-db:user\nsystem-db:site\n");

      const { engine, reports } = await engineFor(node);
      const login = dconfPolicy({
        dbName: "gdm",
        profile: "gdm",
        entries: [{
          schemaId: "org.gnome.desktop.interface",
          key: "clock-format",
          value: "'12h'",
          lock: true,
        }],
      });
      const desk = dconfPolicy({
        entries: [{ schemaId: "org.gnome.desktop.interface", key: "clock-format", value: "'24h'" }],
      });
      engine.handleEvent({ kind: "SNAPSHOT", policy: login, snapshotComplete: false });
      engine.handleEvent({ kind: "SNAPSHOT", policy: desk, snapshotComplete: true });
      await engine.idle();
      assert.equal(reports.get(login.id)!.status, "COMPLIANT", JSON.stringify(reports.get(login.id)));
      assert.equal(reports.get(desk.id)!.status, "COMPLIANT", JSON.stringify(reports.get(desk.id)));
      assert.equal(
        await Deno.readTextFile(`${node.root}/etc/dconf/profile/gdm`),
        "user-db:user\nsystem-db:gdm\nfile-db:/usr/share/gdm/greeter-dconf-defaults\n",
      );
      assert.equal(
        await Deno.readTextFile(`${node.root}/etc/dconf/profile/user`),
        "user-db:user\nsystem-db:local\nsystem-db:site\n",
      );
      assert.match(
        await Deno.readTextFile(`${node.root}/etc/dconf/db/gdm.d/svc-policies`),
        /clock-format='12h'/,
      );
      assert.match(
        await Deno.readTextFile(`${node.root}/etc/dconf/db/local.d/svc-policies`),
        /clock-format='24h'/,
      );

      // The login screen's session: svc's value and GDM's own defaults.
      const home = await Deno.makeTempDir();
      try {
        await Deno.writeTextFile(
          `${home}/profile`,
          `user-db:user\nfile-db:${node.root}/etc/dconf/db/gdm\nfile-db:${node.root}/usr/share/gdm/greeter-dconf-defaults\n`,
        );
        const env = { DCONF_PROFILE: `${home}/profile`, XDG_CONFIG_HOME: home, HOME: home };
        assert.equal(await run("dconf", ["read", "/org/gnome/desktop/interface/clock-format"], env), "'12h'");
        assert.equal(await run("dconf", ["read", "/org/gnome/desktop/interface/cursor-size"], env), "48");
      } finally {
        await Deno.remove(home, { recursive: true });
      }

      // Without policies the profiles are what they were.
      engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
      await engine.idle();
      assert.equal(
        await Deno.readTextFile(`${node.root}/etc/dconf/profile/user`),
        "user-db:user\nsystem-db:site\n",
      );
      assert.equal(await Deno.stat(`${node.root}/etc/dconf/profile/gdm`).catch(() => undefined), undefined);
    } finally {
      await node.cleanup();
    }
  },
});

Deno.test({
  name: "dconf: a local keyfile that overrides svc's value is caught by the read-back (NON_COMPLIANT)",
  ignore,
  async fn() {
    const node = await gnomeNode();
    try {
      await Deno.mkdir(`${node.root}/etc/dconf/db/local.d`, { recursive: true });
      // Sorts before svc-policies: svc wins.
      await Deno.writeTextFile(
        `${node.root}/etc/dconf/db/local.d/00-site`,
        "[org/gnome/desktop/interface]\nclock-format='12h'\n",
      );
      // Sorts after it: the local file wins, and the report says so.
      await Deno.writeTextFile(
        `${node.root}/etc/dconf/db/local.d/zz-local`,
        "[org/gnome/desktop/screensaver]\nlock-delay=uint32 1\n",
      );
      const { engine, reports } = await engineFor(node);
      const p = dconfPolicy({
        entries: [
          { schemaId: "org.gnome.desktop.interface", key: "clock-format", value: "'24h'" },
          { schemaId: "org.gnome.desktop.screensaver", key: "lock-delay", value: "uint32 300" },
        ],
      });
      engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
      await engine.idle();
      const r = reports.get(p.id)!;
      const byKey = new Map(r.items.map((i) => [i.key, i]));
      assert.equal(byKey.get("clock-format")!.status, "COMPLIANT");
      assert.equal(byKey.get("lock-delay")!.status, "NON_COMPLIANT");
      assert.match(byKey.get("lock-delay")!.message, /expected uint32 300, a session reads uint32 1/);
      assert.equal(r.status, "NON_COMPLIANT");
    } finally {
      await node.cleanup();
    }
  },
});
