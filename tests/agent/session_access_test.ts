/**
 * The SessionAccess enforcer on a temp root.
 *
 * logind: systemd-logind cannot run here (PID 1 is not systemd), so, as in notify_test.ts, shell
 * stand-ins first on PATH play `loginctl` (prints four sessions, records lock/terminate calls),
 * `runuser` and `notify-send` (record their argv). The enforcer's clock is set by the test, so
 * warnings at 30/15/5 minutes, the lock at the end and the re-lock on the next tick are checked at
 * exact moments. Everything else is real: the runner, the rule compiler, /etc/passwd and /etc/group of
 * the temp root.
 *
 * pam_time: the real `pam-auth-update --root` enables the svc profile in a copy of this machine's
 * Debian PAM configuration under the temp root, and the real `pamtester` asks the real `pam_time.so`
 * whether alice may log in now, in a private mount namespace (`unshare -m`) where the temp root's
 * time.conf and a one-service pam.d are bind-mounted over /etc/security and /etc/pam.d (libpam reads
 * only those fixed paths, and pamtester has no option to point it elsewhere).
 */
import assert from "node:assert/strict";
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  SessionAccessEffect,
  SessionAccessEndAction,
  SessionAccessPolicySchema,
} from "../../shared/gen/svc/policy/v1/session_access_pb.ts";
import {
  createSessionAccessEnforcer,
  PAM_PROFILE,
  pamTimes,
  TIME_CONF,
} from "../../agent/enforcers/session_access.ts";
import { enforcerRegistry } from "../../agent/enforcers/mod.ts";
import type { CachedPolicy } from "../../agent/sync/types.ts";
import { cachedPolicy, engineFor, type TempNode, tempNode } from "./helpers.ts";
import { Runner } from "../../agent/runner.ts";
import { windowMinutes } from "../../shared/session_access_rules.ts";

const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone;
const ORIGINAL_TIME_CONF = "# original time.conf of the node\n*;*;games;!Al0000-2400\n";

function accessPolicy(
  id: string,
  init: MessageInitShape<typeof SessionAccessPolicySchema>,
  version = 1,
): CachedPolicy {
  return cachedPolicy(SessionAccessPolicySchema, "SessionAccess", id, init, {
    name: `policy ${id}`,
    version,
  });
}

/** Why the pam_time test cannot run here, logged; false when it can. */
async function pamSkip(): Promise<boolean> {
  const reason = !(await commandExists("pam-auth-update"))
    ? "pam-auth-update is missing (libpam-runtime)"
    : !(await commandExists("pamtester"))
    ? "pamtester is not installed (.ci/run installs it)"
    : Deno.uid() !== 0
    ? "needs root for unshare -m and bind mounts over /etc/pam.d and /etc/security"
    : undefined;
  if (reason) console.warn(`pam_time test skipped: ${reason}`);
  return reason !== undefined;
}

async function commandExists(cmd: string): Promise<boolean> {
  return (await new Deno.Command("sh", { args: ["-c", `command -v ${cmd}`], stdout: "null" }).output())
    .success;
}

/** A node with accounts and this machine's Debian PAM configuration copied under its root. */
async function pamNode(): Promise<TempNode> {
  const node = await tempNode({ firefox: false, original: null });
  await Deno.mkdir(`${node.root}/etc/security`, { recursive: true });
  await Deno.writeTextFile(`${node.root}${TIME_CONF}`, ORIGINAL_TIME_CONF);
  await Deno.writeTextFile(
    `${node.root}/etc/passwd`,
    "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\nbob:x:1001:1001::/home/bob:/bin/sh\n" +
      "carol:x:1002:1002::/home/carol:/bin/sh\n",
  );
  await Deno.writeTextFile(
    `${node.root}/etc/group`,
    "root:x:0:\nalice:x:1000:\nbob:x:1001:\ncarol:x:1002:\nkids:x:2000:carol\n",
  );
  for (const dir of ["/usr/share/pam-configs", "/etc/pam.d", "/var/lib/pam"]) {
    await Deno.mkdir(`${node.root}${dir}`, { recursive: true });
    const cp = await new Deno.Command("cp", { args: ["-a", `${dir}/.`, `${node.root}${dir}/`] }).output();
    assert.ok(cp.success, `copy ${dir}`);
  }
  return node;
}

/** The loginctl/runuser/notify-send stand-ins; `calls()` are the recorded argv lines. */
async function standIns(dir: string): Promise<{ bin: string; calls(): Promise<string[]> }> {
  const bin = `${dir}/bin`;
  const log = `${dir}/calls.log`;
  await Deno.mkdir(bin, { recursive: true });
  const sessions = JSON.stringify([
    { session: "2", uid: 1000, user: "alice", seat: "seat0", tty: "tty2", state: "active" },
    { session: "3", uid: 1001, user: "bob", seat: "seat0", tty: "tty3", state: "active" },
    { session: "4", uid: 0, user: "root", seat: null, tty: "tty1", state: "active" },
    { session: "5", uid: 1002, user: "carol", seat: null, tty: "pts/0", state: "active" },
  ]);
  const show = (id: string, name: string, type: string) =>
    `"show-session ${id}") printf 'Id=${id}\\nName=${name}\\nType=${type}\\nClass=user\\nActive=yes\\nRemote=no\\n' ;;`;
  const scripts: Record<string, string> = {
    loginctl: `#!/bin/sh
case "$*" in
"list-sessions --no-legend -o json") printf '%s\\n' '${sessions}' ;;
${show("2", "alice", "wayland")}
${show("3", "bob", "x11")}
${show("4", "root", "tty")}
${show("5", "carol", "tty")}
"lock-session "*|"terminate-session "*) echo "loginctl $*" >> '${log}' ;;
*) echo "unexpected: $*" >&2; exit 1 ;;
esac
`,
    runuser: `#!/bin/sh
[ "$1" = "-u" ] && [ "$3" = "--" ] || exit 2
user="$2"; shift 3
exec "$@"
`,
    "notify-send": `#!/bin/sh
printf 'notify-send' >> '${log}'
for a in "$@"; do printf ' [%s]' "$a" >> '${log}'; done
echo >> '${log}'
`,
  };
  for (const [name, text] of Object.entries(scripts)) {
    await Deno.writeTextFile(`${bin}/${name}`, text, { mode: 0o755 });
  }
  return {
    bin,
    async calls() {
      try {
        return (await Deno.readTextFile(log)).trim().split("\n").filter(Boolean);
      } catch {
        return [];
      }
    },
  };
}

/** Runs `fn` with a runner that finds the stand-ins in `bin` first (the process environment stays untouched). */
async function withPath<T>(bin: string, fn: (runner: Runner) => Promise<T>): Promise<T> {
  return await fn(new Runner({ path: `${bin}:${Deno.env.get("PATH") ?? ""}` }));
}

Deno.test("SessionAccess: warnings at the configured minutes, lock at the end, re-lock, logout, root untouched", async () => {
  const node = await pamNode();
  const fake = await standIns(`${node.root}/../fake`);
  // Wednesday 25 November 2026, 10:35 in the policy's zone.
  let clock = Date.UTC(2026, 10, 25, 10, 35);
  const enforcer = createSessionAccessEnforcer({ tickMs: 3_600_000, now: () => clock });
  try {
    await withPath(fake.bin, async (runner) => {
      const { engine, reports } = await engineFor(node, { enforcers: enforcerRegistry([enforcer]), runner });
      const policy = (version: number, endAction: SessionAccessEndAction) =>
        accessPolicy("sa-1", {
          timeZone: "UTC",
          endAction,
          rules: [
            {
              name: "alice-school-days",
              users: ["alice"],
              effect: SessionAccessEffect.ALLOW,
              windows: [{ days: [3], start: "08:00", end: "11:00" }],
            },
            { name: "kids-never", groups: ["kids"], effect: SessionAccessEffect.DENY },
          ],
        }, version);
      engine.handleEvent({
        kind: "SNAPSHOT",
        policy: policy(1, SessionAccessEndAction.LOCK),
        snapshotComplete: true,
      });
      await engine.idle();
      assert.equal(reports.get("sa-1")?.status, "COMPLIANT", JSON.stringify(reports.get("sa-1")));
      assert.ok(enforcer.active);
      assert.deepEqual(
        reports.get("sa-1")!.items.map((i) => i.key),
        ["alice-school-days", "kids-never"],
        "each rule is reported",
      );
      // 25 minutes left: the 30-minute warning for alice (graphical); carol (group kids) is locked at once.
      let calls = await fake.calls();
      assert.deepEqual(calls.filter((c) => c.startsWith("notify-send")), [
        "notify-send [--app-name=svc] [--icon=dialog-information] [--urgency=critical] [--] " +
        "[Your computer time ends soon] [Your allowed time ends in 25 minutes; then your screen will be locked.]",
      ]);
      assert.deepEqual(calls.filter((c) => c.startsWith("loginctl")), ["loginctl lock-session 5"]);

      clock = Date.UTC(2026, 10, 25, 10, 46);
      await enforcer.tick();
      clock = Date.UTC(2026, 10, 25, 10, 47);
      await enforcer.tick();
      clock = Date.UTC(2026, 10, 25, 10, 56);
      await enforcer.tick();
      calls = await fake.calls();
      const warnings = calls.filter((c) => c.startsWith("notify-send")).map((c) =>
        /ends in (\d+) minute/.exec(c)![1]
      );
      assert.deepEqual(warnings, ["25", "14", "4"], "one warning per configured minute, none repeated");
      assert.ok(!calls.includes("loginctl lock-session 2"), "alice is still inside her window");

      clock = Date.UTC(2026, 10, 25, 11, 0, 5);
      await enforcer.tick();
      clock = Date.UTC(2026, 10, 25, 11, 1);
      await enforcer.tick();
      calls = await fake.calls();
      assert.equal(calls.filter((c) => c === "loginctl lock-session 2").length, 2, "locked, then re-locked");
      assert.ok(!calls.some((c) => / (3|4)$/.test(c)), "bob (no rule) and root are never touched");

      engine.handleEvent({
        kind: "UPDATED",
        policy: policy(2, SessionAccessEndAction.LOGOUT),
        snapshotComplete: false,
      });
      await engine.idle();
      assert.ok((await fake.calls()).includes("loginctl terminate-session 2"));

      engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
      await engine.idle();
      assert.equal(enforcer.active, false, "no policy, no timer");
      const before = (await fake.calls()).length;
      await enforcer.tick();
      assert.equal((await fake.calls()).length, before, "nothing is locked any more");
    });
  } finally {
    await node.cleanup();
  }
});

Deno.test({
  name:
    "SessionAccess with pam_enforcement: time.conf block, pam-auth-update profile, real pam_time refusal, fail open",
  // unshare -m and bind mounts need root.
  ignore: await pamSkip(),
  async fn() {
    const node = await pamNode();
    const fake = await standIns(`${node.root}/../fake`);
    const enforcer = createSessionAccessEnforcer({ tickMs: 3_600_000 });
    const hhmm = (offsetMinutes: number) => {
      const parts = new Intl.DateTimeFormat("en-GB", {
        timeZone: ZONE,
        hour: "2-digit",
        minute: "2-digit",
        hourCycle: "h23",
      }).format(Date.now() + offsetMinutes * 60_000);
      return parts;
    };
    try {
      await withPath(fake.bin, async (runner) => {
        const { engine, reports } = await engineFor(node, {
          enforcers: enforcerRegistry([enforcer]),
          runner,
        });
        // alice may log in only in a window that starts two hours from now; carol (kids) during school.
        const outside = accessPolicy("sa-pam", {
          timeZone: ZONE,
          pamEnforcement: true,
          includeSsh: true,
          rules: [
            {
              name: "alice-later",
              users: ["alice"],
              effect: SessionAccessEffect.ALLOW,
              windows: [{ start: hhmm(120), end: hhmm(180) }],
            },
            {
              name: "kids-school",
              groups: ["kids"],
              effect: SessionAccessEffect.ALLOW,
              windows: [{ days: [1, 2, 3, 4, 5], start: "08:00", end: "13:00" }],
            },
            { name: "staff-never", groups: ["staff"], effect: SessionAccessEffect.DENY },
          ],
        });
        engine.handleEvent({ kind: "SNAPSHOT", policy: outside, snapshotComplete: true });
        await engine.idle();
        const result = reports.get("sa-pam")!;
        assert.equal(result.status, "COMPLIANT", JSON.stringify(result, null, 2));
        assert.deepEqual(result.items.map((i) => i.key), [
          "alice-later",
          "kids-school",
          "staff-never",
          TIME_CONF,
          "pam stack",
        ]);
        const item = (key: string) => result.items.find((i) => i.key === key)!.message;
        assert.match(item("kids-school"), /logins refused by pam_time$/, "carol's line was read back");
        assert.match(
          item("staff-never"),
          /group\(s\) staff have no local members, so pam_time cannot name them/,
        );

        const timeConf = await Deno.readTextFile(`${node.root}${TIME_CONF}`);
        assert.ok(timeConf.startsWith(ORIGINAL_TIME_CONF), "the node's own lines stay");
        const block = timeConf.slice(ORIGINAL_TIME_CONF.length).trim().split("\n");
        assert.equal(block[0], "# BEGIN svc session access (managed by svc-agent; edits are overwritten)");
        assert.equal(block.at(-1), "# END svc session access");
        const services =
          "login|gdm-password|gdm-autologin|lightdm|lightdm-autologin|sddm|sddm-autologin|xdm|sshd";
        assert.equal(
          block[2],
          `${services};*;carol;${
            pamTimes(windowMinutes([{ days: [1, 2, 3, 4, 5], start: "08:00", end: "13:00" }]))
          }`,
        );
        assert.match(block[1], new RegExp(`^${services.replaceAll("|", "\\|")};\\*;alice;Mo\\d{4}-\\d{4}`));
        assert.ok(!timeConf.includes(";root;"), "root is never restricted");
        assert.match(
          await Deno.readTextFile(`${node.root}/etc/pam.d/common-account`),
          /account\s+required\s+pam_time\.so/,
        );
        assert.match(await Deno.readTextFile(`${node.root}${PAM_PROFILE}`), /pam_time\.so/);

        // The real pam_time with this time.conf, in a private mount namespace.
        const pamd = `${node.root}/../pamd`;
        await Deno.mkdir(pamd, { recursive: true });
        await Deno.writeTextFile(
          `${pamd}/login`,
          "auth required pam_permit.so\naccount required pam_time.so\n",
        );
        const pamtester = async (user: string) => {
          const out = await new Deno.Command("unshare", {
            args: [
              "-m",
              "sh",
              "-c",
              `mount --bind "$1" /etc/pam.d && mount --bind "$2" /etc/security && exec pamtester login "$3" acct_mgmt`,
              "sh",
              pamd,
              `${node.root}/etc/security`,
              user,
            ],
            stdout: "piped",
            stderr: "piped",
          }).output();
          return {
            ok: out.success,
            text: new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout),
          };
        };
        const refused = await pamtester("alice");
        assert.equal(refused.ok, false, refused.text);
        assert.match(refused.text, /Permission denied/);
        const bob = await pamtester("bob");
        assert.equal(bob.ok, true, `bob has no rule: ${bob.text}`);
        assert.equal((await pamtester("root")).ok, true, "root is never refused");

        // Inside the window now: pam_time lets alice in.
        engine.handleEvent({
          kind: "UPDATED",
          snapshotComplete: false,
          policy: accessPolicy("sa-pam", {
            timeZone: ZONE,
            pamEnforcement: true,
            rules: [{
              name: "alice-now",
              users: ["alice"],
              effect: SessionAccessEffect.ALLOW,
              windows: [{ start: hhmm(-60), end: hhmm(60) }],
            }],
          }, 2),
        });
        await engine.idle();
        assert.equal(reports.get("sa-pam")!.status, "COMPLIANT");
        const allowed = await pamtester("alice");
        assert.equal(allowed.ok, true, allowed.text);

        // Every policy gone: the stack first, then the block; the node's file is as before.
        engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
        await engine.idle();
        assert.equal(await Deno.readTextFile(`${node.root}${TIME_CONF}`), ORIGINAL_TIME_CONF);
        assert.doesNotMatch(await Deno.readTextFile(`${node.root}/etc/pam.d/common-account`), /pam_time/);
        await assert.rejects(Deno.stat(`${node.root}${PAM_PROFILE}`));
        assert.equal(enforcer.active, false);
        assert.equal((await pamtester("alice")).ok, true, "fail open: alice may log in again");
      });
    } finally {
      await node.cleanup();
    }
  },
});

Deno.test({
  name: "SessionAccess with pam_enforcement and no local account covered: nothing to write is not a failure",
  ignore: await pamSkip(),
  async fn() {
    const node = await pamNode();
    const fake = await standIns(`${node.root}/../fake`);
    const enforcer = createSessionAccessEnforcer({ tickMs: 3_600_000 });
    try {
      await withPath(fake.bin, async (runner) => {
        const { engine, reports } = await engineFor(node, {
          enforcers: enforcerRegistry([enforcer]),
          runner,
        });
        // No local account is in `users` (the node): pam_time gets no line.
        engine.handleEvent({
          kind: "SNAPSHOT",
          snapshotComplete: true,
          policy: accessPolicy("sa-empty", {
            pamEnforcement: true,
            rules: [{ name: "users-never", groups: ["users"], effect: SessionAccessEffect.DENY }],
          }),
        });
        await engine.idle();
        const result = reports.get("sa-empty")!;
        assert.equal(result.status, "COMPLIANT", JSON.stringify(result, null, 2));
        const timeConf = result.items.find((i) => i.key === TIME_CONF)!;
        assert.equal(timeConf.status, "INAPPLICABLE");
        assert.match(timeConf.message, /no local account is restricted by these rules/);
        assert.deepEqual(enforcer.watches!(undefined as never), ["/etc/passwd", "/etc/group"]);
        engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
        await engine.idle();
        assert.equal(enforcer.active, false);
      });
    } finally {
      await node.cleanup();
    }
  },
});

Deno.test("SessionAccess: hostile names are refused by the agent and nothing is written", async () => {
  const node = await pamNode();
  const enforcer = createSessionAccessEnforcer({ tickMs: 3_600_000 });
  try {
    const { engine, reports } = await engineFor(node, { enforcers: enforcerRegistry([enforcer]) });
    for (
      const [id, users] of [["h1", ["alice;*;*;Al0000-2400"]], ["h2", ["root"]], ["h3", ["a\nb"]]] as const
    ) {
      engine.handleEvent({
        kind: "SNAPSHOT",
        snapshotComplete: false,
        policy: accessPolicy(id, {
          pamEnforcement: true,
          rules: [{ users: [...users], effect: SessionAccessEffect.DENY }],
        }),
      });
    }
    engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
    await engine.idle();
    for (const id of ["h1", "h2", "h3"]) {
      assert.equal(reports.get(id)?.status, "ERROR", id);
      assert.match(reports.get(id)!.message, /rejected by the agent: rules\[0\]\.users\[0\]/);
    }
    assert.equal(await Deno.readTextFile(`${node.root}${TIME_CONF}`), ORIGINAL_TIME_CONF);
    assert.equal(enforcer.active, false);
  } finally {
    await node.cleanup();
  }
});
