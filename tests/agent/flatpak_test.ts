/**
 * The Flatpak enforcer against the real `flatpak` command and a real signed repository served on
 * 127.0.0.1 (see tests/helpers/flatpak_repo.ts): remote added with its key, filter and priority,
 * an app installed, updated to a newly published commit and removed, priorities merged, an existing
 * remote adopted and restored, and every trace of svc gone when the last policy goes. The system
 * installation is a temp directory (`FLATPAK_SYSTEM_DIR`). The sync runs in the engine's background
 * lane: the first report of a policy is "in progress", the final one follows.
 */
import assert from "node:assert/strict";
import { FlatpakAppState, FlatpakPolicySchema } from "../../shared/gen/svc/policy/v1/flatpak_pb.ts";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { createFlatpakEnforcer, parseInstalled, parseRemotes } from "../../agent/enforcers/flatpak.ts";
import { enforcerRegistry } from "../../agent/enforcers/mod.ts";
import type { CachedPolicy, PolicyResult } from "../../agent/sync/types.ts";
import { Runner } from "../../agent/runner.ts";
import { cachedPolicy, engineFor, firefoxPolicy, nodeTest, tempNode } from "./helpers.ts";
import { buildFlatpakRepo, flatpakToolsMissing } from "../helpers/flatpak_repo.ts";

// As another user, `flatpak --system` goes through its D-Bus system helper, which a test machine lacks.
const missing = await flatpakToolsMissing() ??
  (Deno.uid() === 0
    ? undefined
    : "needs root: flatpak --system as another user needs its D-Bus system helper");
if (missing) console.warn(`Flatpak enforcer tests skipped: ${missing}`);

function flatpakPolicy(
  id: string,
  init: MessageInitShape<typeof FlatpakPolicySchema>,
  options: { priority?: number; version?: number } = {},
): CachedPolicy {
  return cachedPolicy(FlatpakPolicySchema, "Flatpak", id, init, { name: `policy ${id}`, ...options });
}

async function installedRefs(env: Record<string, string>) {
  const cols = "--columns=application,arch,branch,origin,active";
  return [
    ...parseInstalled(await flatpakOut(env, ["--system", "list", "--app", cols]), "app"),
    ...parseInstalled(await flatpakOut(env, ["--system", "list", "--runtime", cols]), "runtime"),
  ];
}

async function flatpakOut(env: Record<string, string>, args: string[]): Promise<string> {
  const out = await new Runner().run("flatpak", args, { env });
  assert.ok(out.success, `flatpak ${args.join(" ")}: ${out.stderr}`);
  return out.stdout;
}

Deno.test({
  name: "Flatpak: remote, install, update, merge, adoption and full removal on a real repository",
  ignore: missing !== undefined,
  async fn() {
    const repo = await buildFlatpakRepo();
    const node = await tempNode({ firefox: true });
    const env = {
      FLATPAK_SYSTEM_DIR: `${node.root}/var/lib/flatpak`,
      FLATPAK_USER_DIR: `${node.root}/root/.local/share/flatpak`,
    };
    const history: { id: string; result: PolicyResult }[] = [];
    try {
      const { engine, reports } = await engineFor(node, {
        enforcers: enforcerRegistry(
          [...enforcerRegistry().values()].filter((e) => e.type !== "Flatpak")
            .concat(createFlatpakEnforcer({ env })),
        ),
        reportCompliance: (policy, result) => {
          history.push({ id: policy.id, result });
          reports.set(policy.id, result);
          return Promise.resolve();
        },
      });
      // An existing remote of a name the policy uses: adopted, never duplicated, restored at the end.
      await flatpakOut(env, ["--system", "remote-add", "--no-gpg-verify", "--prio=3", "existing", repo.url]);
      // Someone else's remote: svc never touches it.
      await flatpakOut(env, ["--system", "remote-add", "--no-gpg-verify", "other", repo.url]);

      const main = flatpakPolicy("fp-main", {
        remotes: [
          {
            name: "svctest",
            url: repo.url,
            gpgKey: repo.gpgKeyBase64,
            priority: 7,
            filter: "deny org.blocked.*",
          },
          { name: "existing", url: repo.url, gpgKey: repo.gpgKeyBase64, priority: 9, subset: "verified" },
        ],
        apps: [{ appId: repo.appId, remote: "svctest", state: FlatpakAppState.LATEST }],
      }, { priority: 10 });
      const loser = flatpakPolicy("fp-low", {
        apps: [{ appId: repo.appId, state: FlatpakAppState.ABSENT }],
      }, { priority: 1 });
      const firefox = firefoxPolicy({ disableTelemetry: true }, { id: "ff-1" });
      engine.handleEvent({ kind: "SNAPSHOT", policy: main, snapshotComplete: false });
      engine.handleEvent({ kind: "SNAPSHOT", policy: loser, snapshotComplete: false });
      engine.handleEvent({ kind: "SNAPSHOT", policy: firefox, snapshotComplete: true });
      await engine.idle();

      const first = history.find((h) => h.id === "fp-main")!;
      assert.equal(first.result.status, "UNKNOWN", "the background lane reports 'in progress' first");
      assert.match(first.result.message, /in progress/);
      const firefoxAt = history.findIndex((h) => h.id === "ff-1");
      const mainDoneAt = history.findIndex((h) => h.id === "fp-main" && h.result.status !== "UNKNOWN");
      assert.ok(
        firefoxAt >= 0 && mainDoneAt > firefoxAt,
        "Firefox was reported before the Flatpak run ended",
      );

      const result = reports.get("fp-main")!;
      assert.equal(result.status, "COMPLIANT", JSON.stringify(result, null, 2));
      const app = result.items.find((i) => i.key === `app ${repo.appId}`)!;
      assert.match(app.message, /^installed from svctest \(commit [0-9a-f]+\)$/);
      assert.equal(
        result.items.find((i) => i.key === "remote existing")!.message,
        "adopted the existing remote",
      );
      const low = reports.get("fp-low")!;
      assert.equal(low.status, "INAPPLICABLE");
      assert.match(low.items[0].message, /overridden by higher-priority policy "policy fp-main"/);

      let remotes = parseRemotes(
        await flatpakOut(env, ["--system", "remotes", "--columns=name,url,priority,filter,subset,title"]),
      );
      assert.deepEqual(
        [...remotes.keys()].sort(),
        ["existing", "other", "svctest"],
        "adopted, not duplicated",
      );
      assert.equal(remotes.get("svctest")!.priority, "7");
      assert.equal(remotes.get("existing")!.priority, "9");
      assert.equal(remotes.get("existing")!.subset, "verified", "this flatpak supports subsets");
      assert.equal(remotes.get("svctest")!.filter, `${node.root}/etc/svc/flatpak/svctest.filter`);
      assert.match(
        await Deno.readTextFile(`${node.root}/etc/svc/flatpak/svctest.filter`),
        /deny org\.blocked\.\*/,
      );
      const trusted = await Deno.stat(`${env.FLATPAK_SYSTEM_DIR}/repo/svctest.trustedkeys.gpg`);
      assert.ok(trusted.size > 0, "the policy's key was imported for the remote");
      let installed = await installedRefs(env);
      const appRef = `app/${repo.appId}/x86_64/stable`;
      const v1 = await repo.commitOf(appRef);
      assert.equal(installed.find((r) => r.ref === appRef)?.origin, "svctest");
      assert.ok(v1.startsWith(installed.find((r) => r.ref === appRef)!.commit));
      assert.ok(installed.some((r) => r.ref === `runtime/${repo.runtimeId}/x86_64/1`), "runtime pulled");

      // A new commit is published: LATEST updates it on the next sync.
      const v2 = await repo.publish(2);
      assert.notEqual(v1, v2);
      await engine.requestSync();
      await engine.idle();
      const updated = reports.get("fp-main")!.items.find((i) => i.key === `app ${repo.appId}`)!;
      assert.equal(updated.status, "COMPLIANT");
      assert.equal(updated.message, `updated from commit ${v1.slice(0, 12)} to ${v2.slice(0, 12)}`);
      const deployed = await Deno.readTextFile(
        `${env.FLATPAK_SYSTEM_DIR}/app/${repo.appId}/current/active/files/bin/hello`,
      );
      assert.equal(deployed, "#!/bin/sh\necho hello 2\n");

      // ABSENT removes the app and (asked to) every user's data of it; a planted link is not followed.
      await Deno.mkdir(`${node.root}/etc`, { recursive: true });
      await Deno.writeTextFile(
        `${node.root}/etc/passwd`,
        "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\neve:x:1001:1001::/home/eve:/bin/sh\n",
      );
      await Deno.mkdir(`${node.root}/home/alice/.var/app/${repo.appId}`, { recursive: true });
      await Deno.writeTextFile(`${node.root}/home/alice/.var/app/${repo.appId}/settings`, "x");
      await Deno.mkdir(`${node.root}/srv/precious/app/${repo.appId}`, { recursive: true });
      await Deno.mkdir(`${node.root}/home/eve`, { recursive: true });
      await Deno.symlink(`${node.root}/srv/precious`, `${node.root}/home/eve/.var`);
      // ABSENT removes the app; the remote stays.
      engine.handleEvent({
        kind: "UPDATED",
        snapshotComplete: false,
        policy: flatpakPolicy("fp-main", {
          remotes: [{ name: "svctest", url: repo.url, gpgKey: repo.gpgKeyBase64, priority: 7 }],
          apps: [{ appId: repo.appId, state: FlatpakAppState.ABSENT, deleteData: true }],
        }, { priority: 10, version: 2 }),
      });
      await engine.idle();
      const removed = reports.get("fp-main")!;
      assert.equal(removed.status, "COMPLIANT", JSON.stringify(removed, null, 2));
      assert.equal(
        removed.items.find((i) => i.key === `app ${repo.appId}`)!.message,
        "removed with its data (1 home directory)",
      );
      await assert.rejects(Deno.stat(`${node.root}/home/alice/.var/app/${repo.appId}`));
      assert.ok(
        (await Deno.stat(`${node.root}/srv/precious/app/${repo.appId}`)).isDirectory,
        "link not followed",
      );
      installed = await installedRefs(env);
      assert.ok(!installed.some((r) => r.ref === appRef));
      remotes = parseRemotes(
        await flatpakOut(env, ["--system", "remotes", "--columns=name,url,priority,filter,subset,title"]),
      );
      assert.equal(remotes.get("existing")!.priority, "3", "no longer named: the adopted remote is restored");
      assert.equal(remotes.get("existing")!.subset, "", "its subset too");
      assert.equal(remotes.get("svctest")!.filter, "", "the filter went with the policy's filter text");
      await assert.rejects(Deno.stat(`${node.root}/etc/svc/flatpak/svctest.filter`));

      // The app again, then every policy goes: svc removes what it added and nothing else.
      engine.handleEvent({ kind: "UPDATED", policy: { ...main, version: 3 }, snapshotComplete: false });
      await engine.idle();
      assert.equal(reports.get("fp-main")!.status, "COMPLIANT");
      engine.handleEvent({ kind: "SNAPSHOT", policy: firefox, snapshotComplete: true });
      await engine.idle();
      remotes = parseRemotes(
        await flatpakOut(env, ["--system", "remotes", "--columns=name,url,priority,filter"]),
      );
      assert.deepEqual([...remotes.keys()].sort(), ["existing", "other"]);
      assert.equal(remotes.get("existing")!.priority, "3");
      installed = await installedRefs(env);
      assert.deepEqual(installed, [], "the app and the runtime svc pulled are gone");
      const state = JSON.parse(await Deno.readTextFile(`${node.dataDir}/state/flatpak.json`));
      assert.deepEqual(state, { version: 1, remotes: {}, refs: [] });
      const left = await Array.fromAsync(Deno.readDir(`${node.root}/etc/svc/flatpak`)).catch(() => []);
      assert.deepEqual(left, [], "no key or filter file is left");
    } finally {
      await node.cleanup();
      await repo.close();
    }
  },
});

Deno.test({
  name: "Flatpak: a bad signing key leaves no remote behind and reports ERROR; no flatpak → INAPPLICABLE",
  ignore: missing !== undefined,
  async fn() {
    const node = await tempNode({ firefox: false });
    const env = { FLATPAK_SYSTEM_DIR: `${node.root}/var/lib/flatpak`, FLATPAK_USER_DIR: `${node.root}/u` };
    try {
      const { engine, reports } = await engineFor(node, {
        enforcers: enforcerRegistry([createFlatpakEnforcer({ env })]),
      });
      engine.handleEvent({
        kind: "SNAPSHOT",
        policy: flatpakPolicy("fp-bad", {
          remotes: [{ name: "bad", url: "https://127.0.0.1:9/", gpgKey: btoa("not a key at all") }],
        }),
        snapshotComplete: true,
      });
      await engine.idle();
      const bad = reports.get("fp-bad")!;
      assert.equal(bad.status, "ERROR");
      assert.match(bad.items[0].message, /flatpak remote-add failed/);
      const remotes = await new Runner().run("flatpak", ["--system", "remotes", "--columns=name"], { env });
      assert.equal(remotes.stdout.trim(), "", "the half-added remote was deleted");

      // A node without flatpak: a runner whose PATH has no flatpak (the process environment stays untouched).
      const bare = await engineFor(node, {
        enforcers: enforcerRegistry([createFlatpakEnforcer({ env })]),
        runner: new Runner({ path: "/nonexistent" }),
      });
      bare.engine.handleEvent({
        kind: "SNAPSHOT",
        snapshotComplete: true,
        policy: flatpakPolicy("fp-bad", { allowUserInstalls: true }, { version: 2 }),
      });
      await bare.engine.idle();
      assert.equal(bare.reports.get("fp-bad")!.status, "INAPPLICABLE");
      assert.equal(bare.reports.get("fp-bad")!.message, "flatpak is not installed on this node");
    } finally {
      await node.cleanup();
    }
  },
});

nodeTest("Flatpak: hostile remote names and URLs are refused by the agent before any command runs", {
  make: () => tempNode({ firefox: false }),
}, async (node) => {
  const runner = new Runner();
  const { engine, reports } = await engineFor(node, {
    runner,
    enforcers: enforcerRegistry([
      createFlatpakEnforcer({ env: { FLATPAK_SYSTEM_DIR: `${node.root}/fp` } }),
    ]),
  });
  for (
    const [id, remote] of [
      ["n1", { name: "../../etc/passwd", url: "https://example.org/repo/", gpgKey: "AAAA" }],
      ["n2", { name: "--if-not-exists", url: "https://example.org/repo/", gpgKey: "AAAA" }],
      ["n3", { name: "plain", url: "http://mirror.example.org/repo/", gpgKey: "AAAA" }],
      ["n4", { name: "plain", url: "file:///etc/", gpgKey: "AAAA" }],
    ] as const
  ) {
    engine.handleEvent({
      kind: "SNAPSHOT",
      policy: flatpakPolicy(id, { remotes: [remote] }),
      snapshotComplete: false,
    });
  }
  engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();
  for (const id of ["n1", "n2", "n3", "n4"]) {
    assert.equal(reports.get(id)?.status, "ERROR", id);
    assert.match(reports.get(id)!.message, /rejected by the agent: remotes\[0\]\.(name|url)/);
  }
  assert.ok(!runner.history.some((c) => c.args.includes("remote-add")), "nothing was added");
});

Deno.test({
  name:
    "Flatpak: PRESENT apps are updated every update_interval_hours between syncs; the timer stops with the policies",
  ignore: missing !== undefined,
  async fn() {
    const repo = await buildFlatpakRepo();
    const node = await tempNode({ firefox: false });
    const env = {
      FLATPAK_SYSTEM_DIR: `${node.root}/var/lib/flatpak`,
      FLATPAK_USER_DIR: `${node.root}/root/.local/share/flatpak`,
    };
    try {
      // One "hour" is 300 ms here.
      const enforcer = createFlatpakEnforcer({ env, hourMs: 300 });
      const { engine, reports, runner } = await engineFor(node, { enforcers: enforcerRegistry([enforcer]) });
      engine.handleEvent({
        kind: "SNAPSHOT",
        snapshotComplete: true,
        policy: flatpakPolicy("fp-present", {
          remotes: [{ name: "svctest", url: repo.url, gpgKey: repo.gpgKeyBase64 }],
          apps: [{ appId: repo.appId, remote: "svctest", state: FlatpakAppState.PRESENT }],
          updateIntervalHours: 1,
        }),
      });
      await engine.idle();
      assert.equal(reports.get("fp-present")?.status, "COMPLIANT", JSON.stringify(reports.get("fp-present")));
      const appRef = `app/${repo.appId}/x86_64/stable`;
      const v2 = await repo.publish(2);
      const deadline = Date.now() + 120_000;
      for (;;) {
        const installed = (await installedRefs(env)).find((r) => r.ref === appRef);
        if (installed && v2.startsWith(installed.commit)) break;
        if (Date.now() > deadline) throw new Error("the periodic update did not install the new commit");
        await new Promise((r) => setTimeout(r, 200));
      }
      assert.ok(
        runner.history.some((c) => c.args.join(" ") === `--system update -y --noninteractive ${appRef}`),
      );

      engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
      await engine.idle();
      const updates = () => runner.history.filter((c) => c.args.includes("update")).length;
      const before = updates();
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(updates(), before, "no policy, no periodic update");
    } finally {
      await node.cleanup();
      await repo.close();
    }
  },
});
