/**
 * The polkit administrator probe puts the action id into shell text (`script -c` runs its command through a
 * shell), so an id that is not polkit's alphabet must never reach a shell: it is refused before anything runs.
 */
import assert from "node:assert/strict";
import { askPolkitAdmins } from "../../agent/enforcers/privilege/polkit_admins.ts";
import { HOSTILE_STRINGS } from "../helpers/hostile_strings.ts";

Deno.test("polkit admins probe: an action id outside polkit's alphabet never reaches a shell", async () => {
  const ran: string[][] = [];
  const run = (cmd: string, args: string[]) => {
    ran.push([cmd, ...args]);
    return Promise.resolve({ success: true, code: 0, stdout: "", stderr: "", notFound: false });
  };
  for (
    const id of [...HOSTILE_STRINGS.map((h) => h.value), "org.x'; touch /tmp/pwned; '", "$(id)", "-h", ""]
  ) {
    if (/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(id)) continue;
    const answer = await askPolkitAdmins(run as never, id);
    assert.ok(
      "error" in answer && /is not an id/.test(answer.error),
      `${JSON.stringify(id)}: ${JSON.stringify(answer)}`,
    );
  }
  assert.deepEqual(ran, []);
  // A real id is asked about (the probe's own text then decides; here nothing was offered).
  const answer = await askPolkitAdmins(run as never, "org.freedesktop.policykit.exec");
  assert.equal(ran.length, 1);
  assert.ok("error" in answer && /did not ask for an administrator/.test(answer.error));
});
