/**
 * Desktop notifications: logind output parsing, message choice, the silent skip where there is no
 * session, and the whole path through the real Runner to the users of active graphical sessions.
 *
 * PID 1 of this machine is not systemd, so systemd-logind cannot run here at all: the real
 * `loginctl` answers "System has not been booted with systemd as init system" (the no-session
 * case, tested as is). For the session path, small shell scripts placed first on PATH stand in
 * for exactly three programs: `loginctl` (printing what systemd 252 prints for four sessions),
 * `runuser` (switching users needs accounts and a session bus this machine lacks, so it records
 * its argv and environment and runs the command as the current user) and `notify-send` (records
 * its argv and environment). Everything else is real: the Runner spawning processes without a
 * shell, `/usr/bin/env` setting the session bus variables, the parsing and the selection.
 */
import assert from "node:assert/strict";
import {
  DEFAULT_NOTIFICATION_SETTINGS,
  isActiveGraphical,
  Notifier,
  parseProperties,
  parseSessionList,
} from "../../agent/notify.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { Runner } from "../../agent/runner.ts";

const SETTINGS = {
  enabled: true,
  cooldownSeconds: 60,
  defaultMessage: "Log in again to apply the new settings.",
  messageByType: { Firefox: "Restart Firefox.", Chrome: "Restart Chrome." },
};

Deno.test("loginctl list-sessions JSON, its pre-JSON text table and show-session output are parsed", () => {
  const json = `[{"session":"2","uid":1000,"user":"alice","seat":"seat0","tty":"tty2","state":"active",` +
    `"idle":false,"since":null},{"session":"c1","uid":120,"user":"gdm","seat":"seat0","tty":"tty1",` +
    `"state":"online","idle":true,"since":null},{"session":"9","uid":"1001","user":"eve"},{"uid":5}]\n`;
  assert.deepEqual(parseSessionList(json), [
    { id: "2", uid: 1000, user: "alice" },
    { id: "c1", uid: 120, user: "gdm" },
  ], "entries of the wrong shape are skipped");
  assert.deepEqual(parseSessionList("[{broken"), []);

  const list = `      2 1000 alice seat0 tty2
     c1  120 gdm   seat0 tty1
      5 1001 bob         pts/0
garbage line
`;
  assert.deepEqual(parseSessionList(list), [
    { id: "2", uid: 1000, user: "alice" },
    { id: "c1", uid: 120, user: "gdm" },
    { id: "5", uid: 1001, user: "bob" },
  ]);
  const props = parseProperties("Id=2\nName=alice\nType=wayland\nActive=yes\nRemote=no\nClass=user\n");
  assert.equal(isActiveGraphical(props), true);
  assert.equal(isActiveGraphical({ ...props, Type: "tty" }), false);
  assert.equal(isActiveGraphical({ ...props, Active: "no" }), false);
  assert.equal(isActiveGraphical({ ...props, Remote: "yes" }), false);
  assert.equal(isActiveGraphical({ ...props, Class: "greeter" }), false, "the login screen is not a user");
});

Deno.test("message per type from the server's settings, default otherwise, one line per distinct message", () => {
  const notifier = new Notifier({ runner: new Runner(), logger: SILENT_LOGGER, enabled: true });
  notifier.setSettings({
    enabled: true,
    cooldownSeconds: 60,
    defaultMessage: "Log in again.",
    messageByType: { Firefox: "Restart Firefox." },
  });
  assert.equal(notifier.messageFor(["Firefox"]), "Restart Firefox.");
  assert.equal(notifier.messageFor(["Firefox", "Dconf", "Kconfig"]), "Restart Firefox.\nLog in again.");
  notifier.setSettings({ ...DEFAULT_NOTIFICATION_SETTINGS, messageByType: { Firefox: "a\x1b[31mb\0c\td" } });
  assert.equal(notifier.messageFor(["Firefox"]), "a [31mb c d", "control characters never reach notify-send");
});

Deno.test("no logind session: nothing is sent and nothing fails", async () => {
  const runner = new Runner();
  const notifier = new Notifier({ runner, logger: SILENT_LOGGER, enabled: true });
  await notifier.notify(["Firefox"]);
  const commands = runner.history.map((c) => `${c.cmd} ${c.args.join(" ")}`);
  assert.deepEqual(
    commands,
    ["loginctl list-sessions --no-legend -o json"],
    "logind was asked, nobody was notified",
  );
});

Deno.test("switched off locally or by the server: no command runs at all", async () => {
  const runner = new Runner();
  await new Notifier({ runner, logger: SILENT_LOGGER, enabled: false }).notify(["Firefox"]);
  const off = new Notifier({ runner, logger: SILENT_LOGGER, enabled: true });
  off.setSettings({ ...DEFAULT_NOTIFICATION_SETTINGS, enabled: false });
  await off.notify(["Firefox"]);
  assert.equal(runner.history.length, 0);
});

// --- the session path, with stand-ins for loginctl, runuser and notify-send ------------------------

/** One session as systemd 252's `loginctl list-sessions -o json` lists it. */
function listed(
  session: string,
  uid: number,
  user: string,
  seat: string | null,
  tty: string | null,
  active: boolean,
) {
  return { session, uid, user, seat, tty, state: active ? "active" : "online", idle: false, since: null };
}

/** `loginctl list-sessions --no-legend -o json` of systemd 252 (one line, sorted by session id). */
const SESSION_LIST_JSON = JSON.stringify([
  listed("2", 1000, "alice", "seat0", "tty2", true),
  listed("3", 1003, "dave", "seat0", "tty7", false),
  listed("4", 1001, "bob", "seat1", null, true),
  listed("5", 1002, "carol", null, "ttyS0", true),
]);

/** The same sessions as a loginctl without JSON tables prints them (it ignores `-o json`). */
const SESSION_LIST_TEXT = `      2 1000 alice seat0 tty2
      3 1003 dave  seat0 tty7
      4 1001 bob   seat1
      5 1002 carol       ttyS0
`;

/**
 * `loginctl show-session ID` of systemd 252 for a local session of class user: its properties in the order
 * loginctl prints them, those a session lacks (seat, terminal, display, desktop) left out as it leaves them.
 */
function showSession(s: {
  id: string;
  uid: number;
  name: string;
  timestamp: string;
  monotonic: number;
  vt: number;
  seat?: string;
  tty?: string;
  display?: string;
  service: string;
  desktop?: string;
  leader: number;
  type: string;
  active: boolean;
}): string {
  const lines = [
    `Id=${s.id}`,
    `User=${s.uid}`,
    `Name=${s.name}`,
    `Timestamp=${s.timestamp}`,
    `TimestampMonotonic=${s.monotonic}`,
    `VTNr=${s.vt}`,
    s.seat && `Seat=${s.seat}`,
    s.tty && `TTY=${s.tty}`,
    s.display && `Display=${s.display}`,
    "Remote=no",
    `Service=${s.service}`,
    s.desktop && `Desktop=${s.desktop}`,
    `Scope=session-${s.id}.scope`,
    `Leader=${s.leader}`,
    `Audit=${s.id}`,
    `Type=${s.type}`,
    "Class=user",
    `Active=${s.active ? "yes" : "no"}`,
    `State=${s.active ? "active" : "online"}`,
    "IdleHint=no",
    "IdleSinceHint=0",
    "IdleSinceHintMonotonic=0",
    "LockedHint=no",
  ];
  return lines.filter((line) => line).join("\n") + "\n";
}

/** `loginctl show-session ID` per session: X11 and Wayland active, a serial console, a switched-away X11. */
const SHOW_SESSION: Record<string, string> = {
  // alice: X11 on seat0, in front.
  "2": showSession({
    id: "2",
    uid: 1000,
    name: "alice",
    timestamp: "Mon 2025-03-03 08:12:41 CET",
    monotonic: 14627353,
    vt: 2,
    seat: "seat0",
    tty: "tty2",
    display: ":0",
    service: "gdm-password",
    desktop: "gnome-xorg",
    leader: 1436,
    type: "x11",
    active: true,
  }),
  // dave: X11 on seat0 too, but the user switched away from it.
  "3": showSession({
    id: "3",
    uid: 1003,
    name: "dave",
    timestamp: "Mon 2025-03-03 07:58:02 CET",
    monotonic: 9871233,
    vt: 7,
    seat: "seat0",
    tty: "tty7",
    display: ":1",
    service: "lightdm",
    desktop: "xfce",
    leader: 1201,
    type: "x11",
    active: false,
  }),
  // bob: Wayland on a second seat (no virtual terminals there).
  "4": showSession({
    id: "4",
    uid: 1001,
    name: "bob",
    timestamp: "Mon 2025-03-03 08:20:17 CET",
    monotonic: 19201555,
    vt: 0,
    seat: "seat1",
    service: "sddm",
    desktop: "KDE",
    leader: 2210,
    type: "wayland",
    active: true,
  }),
  // carol: a login on the serial console, local and active, but not graphical.
  "5": showSession({
    id: "5",
    uid: 1002,
    name: "carol",
    timestamp: "Mon 2025-03-03 08:31:50 CET",
    monotonic: 26134982,
    vt: 0,
    tty: "ttyS0",
    service: "login",
    leader: 2514,
    type: "tty",
    active: true,
  }),
};

/** One recorded run of a stand-in: its argv and the session variables it saw. */
interface Call {
  tool: string;
  argv: string[];
  env: Record<string, string>;
}

/** The stand-ins on PATH, what they recorded, and a file a shell would create if one ever ran. */
interface FakeDesktop {
  runner: Runner;
  canary: string;
  calls(): Promise<Call[]>;
}

/** Shell lines appending one NUL-separated record: tool, argc, argv, the session variables, "end". */
function recorder(tool: string, log: string): string {
  return `{
  printf '%s\\0' '${tool}' "$#"
  [ "$#" -gt 0 ] && printf '%s\\0' "$@"
  env -0 | grep -z -E '^(DBUS_SESSION_BUS_ADDRESS|DISPLAY|XDG_RUNTIME_DIR)='
  printf 'end\\0'
} >> '${log}'`;
}

/**
 * Runs `fn` with the stand-ins first on PATH and without inherited session variables (so what
 * notify-send sees was set by the agent). `legacyLoginctl` prints the text table whatever `-o` says.
 */
async function withFakeDesktop(
  options: { legacyLoginctl?: boolean },
  fn: (desktop: FakeDesktop) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "svc-notify-test-" });
  const bin = `${dir}/bin`;
  const log = `${dir}/calls.log`;
  await Deno.mkdir(bin);
  const list = options.legacyLoginctl
    ? `list-sessions*) printf '%s' '${SESSION_LIST_TEXT}' ;;`
    : `"list-sessions --no-legend -o json") printf '%s\\n' '${SESSION_LIST_JSON}' ;;`;
  const shows = Object.entries(SHOW_SESSION).map(([id, text]) =>
    `"show-session ${id}") printf '%s' '${text}' ;;`
  );
  const scripts: Record<string, string> = {
    loginctl: `#!/bin/sh
case "$*" in
${list}
${shows.join("\n")}
*) echo "Failed: unexpected arguments: $*" >&2; exit 1 ;;
esac
`,
    runuser: `#!/bin/sh
${recorder("runuser", log)}
if [ "$1" != "-u" ] || [ -z "$2" ] || [ "$3" != "--" ]; then
  echo "runuser: expected -u USER -- COMMAND" >&2
  exit 1
fi
shift 3
exec "$@"
`,
    "notify-send": `#!/bin/sh
${recorder("notify-send", log)}
`,
  };
  for (const [name, text] of Object.entries(scripts)) {
    await Deno.writeTextFile(`${bin}/${name}`, text, { mode: 0o755 });
  }
  try {
    await fn({
      // The stand-ins come first on the runner's PATH, and the session variables of whoever runs the tests are
      // hidden from the tools: the process environment stays untouched (test modules share it).
      runner: new Runner({
        path: `${bin}:${Deno.env.get("PATH") ?? "/usr/bin:/bin"}`,
        hideEnv: ["DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "XDG_RUNTIME_DIR"],
      }),
      canary: `${dir}/canary`,
      async calls() {
        let fields: string[];
        try {
          fields = (await Deno.readTextFile(log)).split("\0");
        } catch (err) {
          if (err instanceof Deno.errors.NotFound) return [];
          throw err;
        }
        const calls: Call[] = [];
        let i = 0;
        while (i < fields.length - 1) {
          const tool = fields[i++];
          const argc = Number(fields[i++]);
          const argv = fields.slice(i, i + argc);
          i += argc;
          const env: Record<string, string> = {};
          while (fields[i] !== "end") {
            const entry = fields[i++];
            const eq = entry.indexOf("=");
            env[entry.slice(0, eq)] = entry.slice(eq + 1);
          }
          i++;
          calls.push({ tool, argv, env });
        }
        return calls;
      },
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** What runuser and notify-send must have been called with to notify `user` (uid) with `body`. */
function expectedCalls(user: string, uid: number, body: string): Call[] {
  const notifyArgs = [
    "--app-name=svc",
    "--icon=dialog-information",
    "--",
    "Settings updated by your administrator",
    body,
  ];
  return [
    {
      tool: "runuser",
      argv: [
        "-u",
        user,
        "--",
        "env",
        `DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/${uid}/bus`,
        `XDG_RUNTIME_DIR=/run/user/${uid}`,
        "notify-send",
        ...notifyArgs,
      ],
      env: {},
    },
    {
      tool: "notify-send",
      argv: notifyArgs,
      // No DISPLAY: notify-send reaches the notification daemon over the user's session bus.
      env: {
        DBUS_SESSION_BUS_ADDRESS: `unix:path=/run/user/${uid}/bus`,
        XDG_RUNTIME_DIR: `/run/user/${uid}`,
      },
    },
  ];
}

Deno.test("exactly the active graphical sessions are notified, once each, as their user, on their bus", async () => {
  await withFakeDesktop({}, async ({ runner, calls }) => {
    const notifier = new Notifier({ runner, logger: SILENT_LOGGER, enabled: true });
    notifier.setSettings(SETTINGS);
    await notifier.notify(["Firefox"]);
    assert.deepEqual(await calls(), [
      ...expectedCalls("alice", 1000, "Restart Firefox."),
      ...expectedCalls("bob", 1001, "Restart Firefox."),
    ], "alice (X11) and bob (Wayland); not carol (serial console) nor dave (switched away)");
    assert.deepEqual(
      runner.history.map((c) => `${c.cmd} ${(c.cmd === "runuser" ? c.args.slice(0, 3) : c.args).join(" ")}`),
      [
        "loginctl list-sessions --no-legend -o json",
        "loginctl show-session 2",
        "loginctl show-session 3",
        "loginctl show-session 4",
        "loginctl show-session 5",
        "runuser -u alice --",
        "runuser -u bob --",
      ],
    );
    assert.ok(runner.history.every((c) => c.result.success));
  });
});

Deno.test("a type without its own message gets the default; several changed types make one notification", async () => {
  await withFakeDesktop({}, async ({ runner, calls }) => {
    let now = 1_000_000;
    const notifier = new Notifier({ runner, logger: SILENT_LOGGER, enabled: true, now: () => now });
    notifier.setSettings(SETTINGS);
    await notifier.notify(["Dconf"]);
    assert.deepEqual(await calls(), [
      ...expectedCalls("alice", 1000, SETTINGS.defaultMessage),
      ...expectedCalls("bob", 1001, SETTINGS.defaultMessage),
    ]);
    now += 60_000;
    await notifier.notify(["Firefox", "Dconf", "Chrome", "Kconfig", "Firefox"]);
    const body = `Restart Firefox.\n${SETTINGS.defaultMessage}\nRestart Chrome.`;
    assert.deepEqual((await calls()).slice(4), [
      ...expectedCalls("alice", 1000, body),
      ...expectedCalls("bob", 1001, body),
    ], "one notification per session, one line per distinct message");
  });
});

Deno.test("within the cooldown nothing is sent; from the end of the cooldown on, it is sent again", async () => {
  await withFakeDesktop({}, async ({ runner, calls }) => {
    let now = 5_000_000;
    const notifier = new Notifier({ runner, logger: SILENT_LOGGER, enabled: true, now: () => now });
    notifier.setSettings(SETTINGS);
    await notifier.notify(["Firefox"]);
    assert.equal((await calls()).filter((c) => c.tool === "notify-send").length, 2);
    now += SETTINGS.cooldownSeconds * 1000 - 1;
    await notifier.notify(["Chrome"]);
    assert.equal((await calls()).length, 4, "one millisecond before the cooldown ends: nothing");
    assert.ok(!runner.history.some((c, i) => i >= 7 && c.cmd === "runuser"), "runuser did not even run");
    now += 1;
    await notifier.notify(["Chrome"]);
    assert.deepEqual((await calls()).slice(4), [
      ...expectedCalls("alice", 1000, "Restart Chrome."),
      ...expectedCalls("bob", 1001, "Restart Chrome."),
    ]);
  });
});

Deno.test("a loginctl without JSON tables (it ignores -o json) still finds the sessions", async () => {
  await withFakeDesktop({ legacyLoginctl: true }, async ({ runner, calls }) => {
    const notifier = new Notifier({ runner, logger: SILENT_LOGGER, enabled: true });
    notifier.setSettings(SETTINGS);
    await notifier.notify(["Firefox"]);
    assert.deepEqual((await calls()).filter((c) => c.tool === "runuser").map((c) => c.argv[1]), [
      "alice",
      "bob",
    ]);
  });
});

Deno.test("a hostile message arrives as one literal argument: no shell, no option, no control character", async () => {
  await withFakeDesktop({}, async ({ runner, calls, canary }) => {
    const hostile = `Restart Firefox.\n$(touch ${canary}) \`touch ${canary}\`; touch ${canary} && ` +
      `echo x > ${canary} | cat < /etc/hostname * ~ 'single' "double" \\back\x1b[31mred\x07bell\x00nul` +
      `\ttab\rcr\x7fdel\n--help -u root`;
    const notifier = new Notifier({ runner, logger: SILENT_LOGGER, enabled: true });
    notifier.setSettings({ ...SETTINGS, messageByType: { Firefox: hostile } });
    await notifier.notify(["Firefox"]);
    const expected = `Restart Firefox.\n$(touch ${canary}) \`touch ${canary}\`; touch ${canary} && ` +
      `echo x > ${canary} | cat < /etc/hostname * ~ 'single' "double" \\back [31mred bell nul` +
      ` tab cr del\n--help -u root`;
    assert.deepEqual(await calls(), [
      ...expectedCalls("alice", 1000, expected),
      ...expectedCalls("bob", 1001, expected),
    ]);
    await assert.rejects(Deno.stat(canary), Deno.errors.NotFound, "no shell ever interpreted the message");
  });
});
