/**
 * The desktop skeleton's shared steps (agent/enforcers/desktop_enforcer.ts), proven once for every desktop type
 * from one table: re-validation refuses bad content (ERROR, nothing written), a missing tool or component makes
 * every policy INAPPLICABLE naming it, a tampered managed file is written back by the next sync, nothing to do
 * (no valid policy) releases svc's files and reports nothing beyond the refused policies, and `watches()` holds
 * what the type needs. Each type runs with its real tool on a temp root, through the same EnforcerIO the sync
 * engine builds (the real managed-file store). SessionAccess's `loginctl` is a stand-in listing no session
 * (systemd-logind cannot run here, and the real one must never lock this machine's sessions).
 *
 * Also: the Firewalld empty zone and the rollup wording of a policy with nothing to enforce, and the size of the
 * desktop enforcer modules (the skeleton keeps each type's own rules short).
 */
import assert from "node:assert/strict";
import { type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { PolkitPolicySchema } from "../../shared/gen/svc/policy/v1/polkit_pb.ts";
import { KconfigPolicySchema } from "../../shared/gen/svc/policy/v1/kconfig_pb.ts";
import { DconfPolicySchema } from "../../shared/gen/svc/policy/v1/dconf_pb.ts";
import { FirewalldPolicySchema } from "../../shared/gen/svc/policy/v1/firewalld_pb.ts";
import {
  SessionAccessEffect,
  SessionAccessPolicySchema,
} from "../../shared/gen/svc/policy/v1/session_access_pb.ts";
import { FlatpakPolicySchema } from "../../shared/gen/svc/policy/v1/flatpak_pb.ts";
import { polkitEnforcer } from "../../agent/enforcers/polkit.ts";
import { kconfigEnforcer } from "../../agent/enforcers/kconfig.ts";
import { dconfEnforcer } from "../../agent/enforcers/dconf.ts";
import { firewalldEnforcer } from "../../agent/enforcers/firewalld.ts";
import { createSessionAccessEnforcer, PAM_PROFILE, TIME_CONF } from "../../agent/enforcers/session_access.ts";
import { createFlatpakEnforcer } from "../../agent/enforcers/flatpak.ts";
import { DiskEncryptionPolicySchema } from "../../shared/gen/svc/policy/v1/disk_encryption_pb.ts";
import { diskEncryptionEnforcer } from "../../agent/disk_encryption/enforcer.ts";
import { isDesktopEnforcer, summarize } from "../../agent/enforcers/desktop_enforcer.ts";
import { lazyEnforcers } from "../../agent/enforcers/mod.ts";
import { ManagedFiles } from "../../agent/sync/managed_files.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { Runner } from "../../agent/runner.ts";
import { type CachedPolicy, type Enforcer, type EnforcerIO, rollupMessage } from "../../agent/sync/types.ts";
import { buildFlatpakRepo, type FlatpakTestRepo, flatpakToolsMissing } from "../helpers/flatpak_repo.ts";
import { cachedPolicy, nodeTest, type TempNode, tempNode } from "./helpers.ts";

const onPath = (cmd: string) =>
  new Deno.Command("sh", { args: ["-c", `command -v ${cmd}`], stdout: "null" }).outputSync().success;
const SCHEMAS = "/usr/share/glib-2.0/schemas";

function cached<D extends DescMessage>(
  schema: D,
  type: string,
  id: string,
  init: MessageInitShape<D>,
): CachedPolicy {
  return cachedPolicy(schema, type, id, init, { name: `policy ${id}` });
}

/** Content the server would refuse, forced into the agent's cache as raw JSON (no typed message). */
function forced(type: string, id: string, content: Record<string, unknown>): CachedPolicy {
  return { id, name: `forced ${id}`, type, version: 1, priority: 0, content: JSON.stringify(content) };
}

async function copyDir(
  from: string,
  to: string,
  keep: (name: string) => boolean = () => true,
): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const e of Deno.readDir(from)) {
    if ((e.isFile || e.isSymlink) && keep(e.name)) {
      await Deno.copyFile(`${from}/${e.name}`, `${to}/${e.name}`);
    }
  }
}

/** How a node lacks what a type needs: a runner without the tool, or a node without the component. */
type WithoutNeed = { runner: () => Runner } | { hide(node: TempNode): Promise<() => Promise<void>> };

/** One desktop type as the table knows it. */
interface SkeletonCase {
  type: string;
  /** Why this machine cannot run the type's tool, if it cannot. */
  unavailable?: string;
  enforcer(context: { flatpakEnv: Record<string, string> }): Enforcer;
  /** Gives the node what the type needs (and the accounts, schemas, PAM configuration it reads). */
  provide(node: TempNode): Promise<void>;
  /** Directories put first on the runner's PATH. */
  path?(node: TempNode): Promise<string>;
  good(): CachedPolicy;
  bad: CachedPolicy;
  /** A file only svc writes, once `good` is enforced (tampered with); undefined: the type writes no file. */
  tampered?: string;
  /** How the node lacks the type's need, and what the INAPPLICABLE message must name; undefined: no need. */
  withoutNeed?: WithoutNeed & { names: RegExp };
  /** Node paths of the type's needs, which `watches()` must hold. */
  needPaths: string[];
  /** What else must be true once nothing is to do. */
  released?(node: TempNode, enforcer: Enforcer): Promise<void>;
  /** Stops what `provide` started. */
  cleanup?(): Promise<void>;
}

const hideDirs = (...dirs: string[]) => async (node: TempNode) => {
  for (const d of dirs) await Deno.rename(`${node.root}${d}`, `${node.root}${d}.hidden`);
  return async () => {
    for (const d of dirs) await Deno.rename(`${node.root}${d}.hidden`, `${node.root}${d}`);
  };
};
const bareRunner = () => new Runner({ path: "/nonexistent" });

let flatpakRepo: FlatpakTestRepo | undefined;
const FLATPAK_MISSING = await flatpakToolsMissing() ??
  (Deno.uid() === 0
    ? undefined
    : "needs root: flatpak --system as another user needs its D-Bus system helper");

const CASES: SkeletonCase[] = [
  {
    type: "Polkit",
    enforcer: () => polkitEnforcer,
    async provide(node) {
      await Deno.mkdir(`${node.root}/etc/polkit-1/rules.d`, { recursive: true });
      await Deno.mkdir(`${node.root}/usr/share/polkit-1/actions`, { recursive: true });
    },
    good: () =>
      cached(PolkitPolicySchema, "Polkit", "good", {
        rules: [{ name: "deny-mount", actionIds: ["org.freedesktop.udisks2.filesystem-mount"], result: 1 }],
      }),
    bad: forced("Polkit", "bad", {
      rules: [{ name: "x", action_ids: ["org.a'); polkit.addRule(x"], result: 1 }],
    }),
    tampered: "/etc/polkit-1/rules.d/10-svc-2147483647-good.rules",
    withoutNeed: { hide: hideDirs("/etc/polkit-1", "/usr/share/polkit-1"), names: /polkit is not installed/ },
    needPaths: ["/etc/polkit-1", "/usr/share/polkit-1"],
  },
  {
    type: "Kconfig",
    enforcer: () => kconfigEnforcer,
    async provide(node) {
      await Deno.mkdir(`${node.root}/usr/bin`, { recursive: true });
      await Deno.writeTextFile(`${node.root}/usr/bin/plasmashell`, "");
    },
    good: () =>
      cached(KconfigPolicySchema, "Kconfig", "good", {
        entries: [{ file: "kdeglobals", group: "Icons", key: "Theme", value: "breeze", immutable: true }],
      }),
    bad: forced("Kconfig", "bad", {
      entries: [{ file: "../passwd", group: "Icons", key: "Theme", value: "x" }],
    }),
    tampered: "/etc/xdg/kdeglobals",
    withoutNeed: { hide: hideDirs("/usr/bin"), names: /KDE Plasma is not installed/ },
    needPaths: ["/usr/bin/plasmashell", "/usr/bin/kwin_wayland"],
  },
  {
    type: "Dconf",
    unavailable: !onPath("dconf") || !(await Deno.stat(`${SCHEMAS}/org.gnome.desktop.screensaver.gschema.xml`)
        .then(() => true, () => false))
      ? "needs the dconf command and gsettings-desktop-schemas"
      : undefined,
    enforcer: () => dconfEnforcer,
    provide: (node) =>
      copyDir(SCHEMAS, `${node.root}${SCHEMAS}`, (n) => n.endsWith(".xml") || n.endsWith(".override")),
    good: () =>
      cached(DconfPolicySchema, "Dconf", "good", {
        entries: [{
          schemaId: "org.gnome.desktop.screensaver",
          key: "lock-delay",
          value: "uint32 300",
          lock: true,
        }],
      }),
    bad: forced("Dconf", "bad", {
      entries: [{ schema_id: "org.gnome.desktop.screensaver", key: "lock-delay\n[x]", value: "uint32 1" }],
    }),
    tampered: "/etc/dconf/db/local.d/svc-policies",
    withoutNeed: { runner: bareRunner, names: /dconf is not installed/ },
    needPaths: ["/usr/bin/dconf"],
  },
  {
    type: "Firewalld",
    unavailable: onPath("firewall-offline-cmd") ? undefined : "needs firewall-offline-cmd (firewalld)",
    enforcer: () => firewalldEnforcer,
    async provide(node) {
      await Deno.mkdir(`${node.root}/etc/firewalld/zones`, { recursive: true });
      await Deno.copyFile("/etc/firewalld/firewalld.conf", `${node.root}/etc/firewalld/firewalld.conf`);
    },
    good: () =>
      cached(FirewalldPolicySchema, "Firewalld", "good", { zones: [{ name: "svcwork", services: ["ssh"] }] }),
    bad: forced("Firewalld", "bad", { zones: [{ name: "../../passwd", services: ["ssh"] }] }),
    tampered: "/etc/firewalld/zones/svcwork.xml",
    withoutNeed: { runner: bareRunner, names: /firewalld is not installed.*firewall-offline-cmd/ },
    needPaths: ["/usr/bin/firewall-offline-cmd", "/etc/firewalld"],
  },
  {
    type: "SessionAccess",
    unavailable: onPath("pam-auth-update") ? undefined : "needs pam-auth-update (libpam-runtime)",
    enforcer: () => createSessionAccessEnforcer({ tickMs: 3_600_000 }),
    async provide(node) {
      await Deno.mkdir(`${node.root}/etc/security`, { recursive: true });
      await Deno.writeTextFile(`${node.root}${TIME_CONF}`, "# the node's own time.conf\n");
      await Deno.writeTextFile(
        `${node.root}/etc/passwd`,
        "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/h:/bin/sh\n",
      );
      await Deno.writeTextFile(`${node.root}/etc/group`, "root:x:0:\nalice:x:1000:\n");
      for (const dir of ["/usr/share/pam-configs", "/etc/pam.d", "/var/lib/pam"]) {
        await Deno.mkdir(`${node.root}${dir}`, { recursive: true });
        const cp = await new Deno.Command("cp", { args: ["-a", `${dir}/.`, `${node.root}${dir}/`] }).output();
        assert.ok(cp.success, `copy ${dir}`);
      }
    },
    async path(node) {
      const bin = `${node.root}/../standin`;
      await Deno.mkdir(bin, { recursive: true });
      await Deno.writeTextFile(
        `${bin}/loginctl`,
        '#!/bin/sh\n[ "$1" = list-sessions ] && { echo "[]"; exit 0; }\nexit 1\n',
        { mode: 0o755 },
      );
      return bin;
    },
    good: () =>
      cached(SessionAccessPolicySchema, "SessionAccess", "good", {
        pamEnforcement: true,
        rules: [{ name: "alice-never", users: ["alice"], effect: SessionAccessEffect.DENY }],
      }),
    bad: forced("SessionAccess", "bad", { rules: [{ users: ["alice;*;*;Al0000-2400"], effect: 2 }] }),
    tampered: PAM_PROFILE,
    // No need: without loginctl each rule says sessions are not locked; without a PAM tool the stack item says so.
    needPaths: [],
    async released(node, enforcer) {
      assert.equal((enforcer as unknown as { active: boolean }).active, false, "the session timer stopped");
      assert.doesNotMatch(await Deno.readTextFile(`${node.root}/etc/pam.d/common-account`), /pam_time/);
    },
  },
  {
    type: "Flatpak",
    unavailable: FLATPAK_MISSING,
    enforcer: ({ flatpakEnv }) => createFlatpakEnforcer({ env: flatpakEnv }),
    async provide() {
      flatpakRepo = await buildFlatpakRepo();
    },
    async cleanup() {
      await flatpakRepo?.close();
      flatpakRepo = undefined;
    },
    good: () =>
      cached(FlatpakPolicySchema, "Flatpak", "good", {
        remotes: [{ name: "svcskel", url: flatpakRepo!.url, gpgKey: flatpakRepo!.gpgKeyBase64, priority: 3 }],
      }),
    bad: forced("Flatpak", "bad", {
      remotes: [{ name: "../../etc/passwd", url: "https://x.org/", gpg_key: "AAAA" }],
    }),
    tampered: "/etc/svc/flatpak/svcskel.asc",
    withoutNeed: { runner: bareRunner, names: /flatpak is not installed/ },
    needPaths: ["/usr/bin/flatpak"],
    async released(node) {
      const out = await new Runner().run("flatpak", ["--system", "remotes", "--columns=name"], {
        env: { FLATPAK_SYSTEM_DIR: `${node.root}/var/lib/flatpak` },
      });
      assert.equal(out.stdout.trim(), "", "the remote svc added is gone");
      const state = JSON.parse(await Deno.readTextFile(`${node.dataDir}/state/flatpak.json`));
      assert.deepEqual(state, { version: 1, remotes: {}, refs: [] });
    },
  },
  {
    type: "DiskEncryption",
    unavailable: onPath("cryptsetup") ? undefined : "needs cryptsetup",
    enforcer: () => diskEncryptionEnforcer,
    async provide(node) {
      // A LUKS2 volume on an image file, the one device the agent inventories.
      await Deno.mkdir(`${node.root}/images`);
      const image = `${node.root}/images/disk.img`;
      await Deno.writeFile(image, new Uint8Array(20 * 1024 * 1024));
      const format = await new Runner().run("cryptsetup", [
        "luksFormat",
        ...["--type", "luks2", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "-q"],
        ...[image, "--key-file=-"],
      ], { stdin: "unlock" });
      assert.ok(format.success, format.stderr);
      node.config.diskEncryption.devices = ["/images/disk.img"];
    },
    good: () =>
      cached(DiskEncryptionPolicySchema, "DiskEncryption", "good", {
        requireEncryption: true,
        minLuksVersion: 2,
      }),
    bad: forced("DiskEncryption", "bad", {
      tang: { servers: [{ url: "file:///etc/shadow", thumbprint: "x" }] },
    }),
    // No tamper step: it writes no file (it reads the headers; the manager's escrow changes keyslots, not files).
    withoutNeed: { runner: bareRunner, names: /^cryptsetup is not installed on this node$/ },
    needPaths: ["/usr/sbin/cryptsetup", "/usr/bin/cryptsetup"],
  },
];

/** The EnforcerIO the sync engine gives a type (agent/sync/engine.ts), over the real managed-file store. */
async function ioFor(
  node: TempNode,
  type: string,
  runner: Runner,
): Promise<{ io: EnforcerIO; managed: ManagedFiles }> {
  const managed = await ManagedFiles.load(node.dataDir, SILENT_LOGGER);
  const io: EnforcerIO = {
    fs: node.fs,
    runner,
    logger: SILENT_LOGGER,
    config: node.config,
    managedPaths: () => managed.list(type).map((r) => r.path),
    writeManaged: (path, content, options = {}) =>
      managed.write(node.fs, { path, type, content, ...options }),
    releaseManaged: (path) => managed.release(node.fs, path),
  };
  return { io, managed };
}

/** Node path → content of every file under the root. */
async function tree(root: string, dir = ""): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const e of Deno.readDir(`${root}${dir}`)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) { for (const [p, t] of await tree(root, path)) out.set(p, t); }
    else if (e.isFile) out.set(path, await Deno.readTextFile(`${root}${path}`).catch(() => "<binary>"));
  }
  return out;
}

for (const c of CASES) {
  Deno.test({
    name:
      `desktop skeleton, ${c.type}: bad content refused, missing need INAPPLICABLE, tamper restored, nothing to do releases, watches`,
    ignore: c.unavailable !== undefined,
    async fn() {
      const node = await tempNode({ firefox: false, original: null });
      const flatpakEnv = { FLATPAK_SYSTEM_DIR: `${node.root}/var/lib/flatpak` };
      const enforcer = c.enforcer({ flatpakEnv });
      try {
        await c.provide(node);
        const path = `${c.path ? `${await c.path(node)}:` : ""}${Deno.env.get("PATH") ?? ""}`;
        const { io, managed } = await ioFor(node, c.type, new Runner({ path }));
        // No policy at all: no result, nothing changed (the tool may set up its own files, e.g. an installation).
        const idle = await enforcer.sync([], io);
        assert.deepEqual([idle.policies, idle.changed], [[], []]);
        const before = await tree(node.root);

        // watches(): what the type needs is watched, so installing it later re-evaluates at once.
        const watched = enforcer.watches!(io);
        for (const p of c.needPaths) assert.ok(watched.includes(p), `${c.type} watches ${p}: ${watched}`);
        if (c.needPaths.length === 0) assert.deepEqual(watched, ["/etc/passwd", "/etc/group"]);

        // Re-validation: ERROR naming the refusal; nothing written, nothing managed.
        const refused = await enforcer.sync([c.bad], io);
        assert.deepEqual(refused.policies.map((r) => [r.policyId, r.status]), [["bad", "ERROR"]]);
        assert.match(refused.policies[0].message, /^policy content rejected by the agent: /);
        assert.deepEqual([refused.changed, io.managedPaths()], [[], []]);
        assert.deepEqual(await tree(node.root), before, "nothing written");

        // The node lacks what the type needs: every policy INAPPLICABLE naming it, nothing written.
        if (c.withoutNeed) {
          const bare = "runner" in c.withoutNeed
            ? (await ioFor(node, c.type, c.withoutNeed.runner())).io
            : io;
          const restore = "hide" in c.withoutNeed ? await c.withoutNeed.hide(node) : async () => {};
          const lacking = await enforcer.sync([c.good()], bare);
          await restore();
          assert.deepEqual(lacking.policies.map((r) => r.status), ["INAPPLICABLE"]);
          assert.match(lacking.policies[0].message, c.withoutNeed.names);
          assert.deepEqual(await tree(node.root), before, "nothing written");
        }

        // Enforced: the file is svc's and managed.
        const good = await enforcer.sync([c.good()], io);
        assert.notEqual(good.policies[0].status, "ERROR", JSON.stringify(good.policies[0]));
        const wereManaged = io.managedPaths();

        // Tamper: the file no longer holds what svc wrote (what the tamper watcher checks); the next sync writes it back.
        if (c.tampered) {
          assert.ok(io.managedPaths().includes(c.tampered), `${c.tampered} in ${io.managedPaths()}`);
          const written = await Deno.readTextFile(`${node.root}${c.tampered}`);
          await Deno.writeTextFile(`${node.root}${c.tampered}`, "tampered\n");
          assert.equal(await managed.verify(node.fs, c.tampered), false);
          const again = await enforcer.sync([c.good()], io);
          assert.ok(again.changed.includes(c.tampered), `${c.tampered} restored: ${again.changed}`);
          assert.equal(await Deno.readTextFile(`${node.root}${c.tampered}`), written);
          assert.equal(await managed.verify(node.fs, c.tampered), true);
        }

        // Nothing to do (only a refused policy): svc's files go, only the refused policy is reported.
        const nothing = await enforcer.sync([c.bad], io);
        assert.deepEqual(nothing.policies.map((r) => [r.policyId, r.status]), [["bad", "ERROR"]]);
        assert.deepEqual(io.managedPaths(), []);
        const after = await tree(node.root);
        for (const p of wereManaged) {
          assert.equal(after.get(p), before.get(p), `${p} is as it was before svc`);
        }
        await c.released?.(node, enforcer);
        const none = await enforcer.sync([], io);
        assert.deepEqual([none.policies, none.changed], [[], []], "no stray results, nothing changed");
      } finally {
        await c.cleanup?.();
        await node.cleanup();
      }
    },
  });
}

nodeTest("Firewalld: a policy whose zone names nothing to enforce is UNKNOWN, worded like any empty rollup", {
  make: () => tempNode({ firefox: false, original: null }),
  ignore: CASES[3].unavailable !== undefined,
}, async (node) => {
  await CASES[3].provide(node);
  const { io } = await ioFor(node, "Firewalld", new Runner());
  const empty = cached(FirewalldPolicySchema, "Firewalld", "empty", { zones: [{ name: "svcempty" }] });
  const [result] = (await firewalldEnforcer.sync([empty], io)).policies;
  assert.deepEqual(
    [result.status, result.message, result.items],
    ["UNKNOWN", "0 of 0 setting(s) in effect: nothing to enforce", []],
  );
});

Deno.test("the rollup words an empty policy and one with only unknown items the same way for every type", () => {
  assert.deepEqual(summarize([], { inEffect: () => "never", otherwise: () => "never" }), {
    status: "UNKNOWN",
    message: "0 of 0 setting(s) in effect: nothing to enforce",
  });
  assert.deepEqual(
    summarize([], { inEffect: () => "never", noun: "key(s)" }).message,
    rollupMessage([], "key(s)"),
  );
  const items = [
    { schemaId: "s", key: "a", status: "COMPLIANT" as const, message: "ok" },
    { schemaId: "s", key: "b", status: "UNKNOWN" as const, message: "not checked here" },
  ];
  assert.deepEqual(summarize(items, { inEffect: () => "never" }), {
    status: "UNKNOWN",
    message: "1 of 2 setting(s) in effect; not known: b (not checked here)",
  });
});

Deno.test("every desktop type of the agent's registry runs the skeleton's steps", async () => {
  const desktop = lazyEnforcers().filter((e) => CASES.some((c) => c.type === e.type));
  assert.deepEqual(desktop.map((e) => e.type).sort(), CASES.map((c) => c.type).sort());
  for (const lazy of desktop) {
    assert.ok(isDesktopEnforcer(await lazy.load()), `${lazy.type} is built by the skeleton`);
  }
  assert.ok(!isDesktopEnforcer(await lazyEnforcers().find((e) => e.type === "Firefox")!.load()));
});

/** Modules under `dir` (recursively) that build an enforcer with the skeleton, by agent-relative path. */
async function skeletonModules(dir: URL, prefix = ""): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isDirectory) {
      found.push(...await skeletonModules(new URL(`${entry.name}/`, dir), `${prefix}${entry.name}/`));
    } else if (entry.name.endsWith(".ts") && entry.name !== "desktop_enforcer.ts") {
      const text = await Deno.readTextFile(new URL(entry.name, dir));
      if (/\bdesktopEnforcer\s*[<(]/.test(text)) found.push(`${prefix}${entry.name}`);
    }
  }
  return found.sort();
}

Deno.test("every desktop enforcer module is at most 250 lines: the skeleton and the named parts hold the rest", async () => {
  const agent = new URL("../../agent/", import.meta.url);
  // Found by the skeleton's call, so a new desktop type is measured without editing this test.
  const modules = await skeletonModules(agent);
  // The search must see every desktop type of the agent's registry (its module as the registry imports it).
  const registry = await Deno.readTextFile(new URL("enforcers/registry.gen.ts", agent));
  const moduleOf = new Map(
    [...registry.matchAll(/lazy\("(\w+)", \(\) => import\("([^"]+)"\)/g)].map(([, type, path]) => [
      type,
      new URL(path, new URL("enforcers/", agent)).href.slice(agent.href.length),
    ]),
  );
  for (const lazy of lazyEnforcers()) {
    if (!isDesktopEnforcer(await lazy.load())) continue;
    assert.ok(
      modules.includes(moduleOf.get(lazy.type)!),
      `${lazy.type} (${moduleOf.get(lazy.type)}) is found`,
    );
  }
  for (const name of ["proxy", "certificates", "polkit", "kconfig", "dconf", "firewalld", "flatpak"]) {
    assert.ok(modules.includes(`enforcers/${name}.ts`), `enforcers/${name}.ts is measured`);
  }
  const sizes: Record<string, number> = {};
  for (const path of modules) {
    sizes[path] = (await Deno.readTextFile(new URL(path, agent))).trimEnd().split("\n").length;
  }
  assert.deepEqual(Object.entries(sizes).filter(([, n]) => n > 250), [], JSON.stringify(sizes));
});
