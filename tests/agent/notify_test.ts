/**
 * Desktop notifications: logind output parsing, message choice, and the silent skip where there
 * is no session (this machine has no running logind, which is exactly that case).
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

Deno.test("loginctl list-sessions and show-session output is parsed", () => {
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
  assert.deepEqual(commands, ["loginctl list-sessions --no-legend"], "logind was asked, nobody was notified");
});

Deno.test("switched off locally or by the server: no command runs at all", async () => {
  const runner = new Runner();
  await new Notifier({ runner, logger: SILENT_LOGGER, enabled: false }).notify(["Firefox"]);
  const off = new Notifier({ runner, logger: SILENT_LOGGER, enabled: true });
  off.setSettings({ ...DEFAULT_NOTIFICATION_SETTINGS, enabled: false });
  await off.notify(["Firefox"]);
  assert.equal(runner.history.length, 0);
});
