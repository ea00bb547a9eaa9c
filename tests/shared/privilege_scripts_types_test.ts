/**
 * Privilege and Scripts content: validation (each rule names the field and the fix), the Privilege merge (per
 * principal the higher priority decides, deny beats allow at equal priority and across principals), the rendered
 * sudoers file checked by the real `visudo`, the polkit administrator rule checked by a JavaScript parser, and the
 * shared hostile corpus against every field that reaches a sudoers file, polkit's JavaScript, a systemd unit or a
 * shell.
 */
import assert from "node:assert/strict";
import { create, fromJsonString } from "@bufbuild/protobuf";
import { PrivilegePolicySchema } from "../../shared/gen/svc/policy/v1/privilege_pb.ts";
import { ScriptsPolicySchema } from "../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { validatePolicyContent } from "../../shared/policy_types/mod.ts";
import {
  administrators,
  localSudoGroupsOf,
  mergePrivilege,
  type PrivilegeInput,
  renderSudoers,
} from "../../shared/privilege_rules.ts";
import { renderPolkitAdminRule } from "../../shared/polkit_js.ts";
import { checkPolkitAdminScript, PolkitScriptError } from "../../agent/enforcers/polkit_script.ts";
import { renderScriptUnit } from "../../agent/enforcers/scripts.ts";
import { HOSTILE_STRINGS, hostileStrings, SUDOERS_HOSTILE_STRINGS } from "../helpers/hostile_strings.ts";

const hasVisudo = await new Deno.Command("sh", { args: ["-c", "command -v visudo"], stdout: "null" }).output()
  .then((o) => o.success);
if (!hasVisudo) console.warn("visudo checks skipped: visudo is missing (apt-get install sudo)");

async function visudo(text: string): Promise<{ ok: boolean; words: string }> {
  const child = new Deno.Command("visudo", { args: ["-c", "-f", "-"], stdin: "piped", stderr: "piped" })
    .spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(text));
  await w.close();
  const out = await child.output();
  return { ok: out.success, words: new TextDecoder().decode(out.stderr) };
}

function issues(type: string, content: unknown) {
  return validatePolicyContent(type, JSON.stringify(content));
}

function input(id: string, priority: number, content: unknown): PrivilegeInput {
  return {
    id,
    name: `policy ${id}`,
    priority,
    content: fromJsonString(PrivilegePolicySchema, JSON.stringify(content)),
  };
}

Deno.test("Privilege: validation names the field and the fix", () => {
  assert.match(issues("Privilege", { entries: [] })[0]?.message ?? "", /at least one rule \(an entry/);
  assert.deepEqual(issues("Privilege", { local_sudo_group_not_admin: true }), []);
  const cases: [unknown, string, RegExp][] = [
    [{ user: "alice" }, "entries[0].effect", /choose an effect/],
    [{ effect: "PRIVILEGE_EFFECT_ALLOW" }, "entries[0].user", /exactly one of user and group/],
    [{ user: "a", group: "b", effect: 1 }, "entries[0].user", /exactly one/],
    [{ user: "root", effect: 2 }, "entries[0].user", /root is always an administrator/],
    [{ group: "root", effect: 2 }, "entries[0].group", /root is always/],
    [{ user: "ALL", effect: 1 }, "entries[0].user", /sudoers alias/],
    [{ group: "ADMINS", effect: 1 }, "entries[0].group", /sudoers alias/],
    [{ user: "al,ice", effect: 1 }, "entries[0].user", /user name/],
    [
      { user: "bob", effect: 2, sudo_nopasswd: true },
      "entries[0].sudo_nopasswd",
      /only applies to an allowed/,
    ],
    [{ user: "bob", effect: 1, name: "has space" }, "entries[0].name", /letters, digits/],
  ];
  for (const [entry, field, message] of cases) {
    const found = issues("Privilege", { entries: [entry] });
    assert.ok(
      found.some((i) => i.field === field && message.test(i.message)),
      `${JSON.stringify(entry)}: ${JSON.stringify(found)}`,
    );
  }
  const twice = issues("Privilege", { entries: [{ user: "bob", effect: 1 }, { user: "bob", effect: 2 }] });
  assert.match(twice[0].message, /listed twice/);
  assert.equal(twice[0].field, "entries[1].user");
  assert.deepEqual(
    issues("Privilege", { entries: [{ group: "domain admins", effect: 1, sudo_nopasswd: true }] }),
    [],
  );
});

Deno.test("Privilege merge: higher priority wins per principal, deny beats allow at equal priority", () => {
  const merge = mergePrivilege([
    input("a", 10, { entries: [{ user: "alice", effect: "PRIVILEGE_EFFECT_DENY" }] }),
    input("b", 5, {
      entries: [{ user: "alice", effect: "PRIVILEGE_EFFECT_ALLOW" }, { user: "carol", effect: 1 }],
    }),
    input("c", 5, { entries: [{ user: "carol", effect: "PRIVILEGE_EFFECT_DENY" }] }),
    input("d", 1, { entries: [{ user: "dave", effect: 1, sudo_nopasswd: true }] }),
    input("e", 20, { entries: [{ user: "dave", effect: 1 }] }),
  ]);
  assert.equal(merge.winners.get("user:alice")?.policyId, "a", "priority 10 deny beats priority 5 allow");
  assert.equal(merge.winners.get("user:carol")?.policyId, "c", "equal priority: deny beats allow");
  assert.equal(merge.winners.get("user:dave")?.policyId, "e", "the higher priority's options apply");
  assert.equal(merge.winners.get("user:dave")?.nopasswd, false);
  const sudoers = renderSudoers(merge, ["sudo"]);
  const lines = sudoers.split("\n").filter((l) => l && !l.startsWith("#"));
  assert.deepEqual(lines, ["dave ALL=(ALL:ALL) ALL", "alice ALL=(ALL:ALL) !ALL", "carol ALL=(ALL:ALL) !ALL"]);
});

Deno.test("Privilege: revocations come after grants; the local sudo groups; polkit identities", async () => {
  const merge = mergePrivilege([
    input("a", 0, {
      entries: [{ group: "domain admins", effect: 1, sudo_nopasswd: true }, { user: "eve", effect: 2 }],
      local_sudo_group_not_admin: true,
    }),
    input("b", 0, { entries: [{ group: "sudo", effect: 1 }] }),
  ]);
  const local = localSudoGroupsOf(
    "Defaults env_reset\nroot ALL=(ALL:ALL) ALL\n%sudo\tALL=(ALL:ALL) ALL\n%wheel ALL=(ALL) NOPASSWD: ALL\n# %admin ALL=(ALL) ALL\n",
  );
  assert.deepEqual(local, ["sudo", "wheel"]);
  const sudoers = renderSudoers(merge, local);
  assert.deepEqual(sudoers.split("\n").filter((l) => l && !l.startsWith("#")), [
    "%domain\\ admins ALL=(ALL:ALL) NOPASSWD: ALL",
    "%sudo ALL=(ALL:ALL) ALL",
    "%sudo ALL=(ALL:ALL) !ALL",
    "%wheel ALL=(ALL:ALL) !ALL",
    "eve ALL=(ALL:ALL) !ALL",
  ]);
  // The revoked local group's explicit grant does not make it an administrator (deny beats allow).
  assert.deepEqual(administrators(merge, local), [{ kind: "group", name: "domain admins" }]);
  assert.deepEqual(
    administrators(mergePrivilege([input("x", 0, { entries: [{ user: "bob", effect: 2 }] })]), local),
    [
      { kind: "group", name: "sudo" },
      { kind: "group", name: "wheel" },
    ],
  );
  const polkit = renderPolkitAdminRule(["unix-group:domain admins", "unix-user:alice"]);
  checkPolkitAdminScript(polkit, 2);
  assert.throws(() => checkPolkitAdminScript(polkit, 3), PolkitScriptError);
  assert.throws(
    () => checkPolkitAdminScript(polkit.replace("return [", 'polkit.log("x"); return ['), 2),
    PolkitScriptError,
  );
  if (hasVisudo) {
    const check = await visudo(sudoers);
    assert.ok(check.ok, check.words);
  }
});

Deno.test({
  name: "Privilege: visudo refuses what the sanitizers would never let through (the file is vetted anyway)",
  ignore: !hasVisudo,
  async fn() {
    const broken = await visudo("alice ALL=(ALL:ALL) ALL\nbob, ALL=(ALL) ALL\n");
    assert.equal(broken.ok, false);
    assert.match(broken.words, /syntax error/);
  },
});

const PRIVILEGE_PLACES: [string, (v: string) => unknown][] = [
  ["entries[0].user", (v) => ({ user: v, effect: 1 })],
  ["entries[0].group", (v) => ({ group: v, effect: 2 })],
  ["entries[0].name", (v) => ({ name: v, user: "alice", effect: 1 })],
];

Deno.test("Privilege: hostile strings are refused naming the field, or inert in sudoers (visudo) and polkit", async () => {
  let refused = 0;
  let total = 0;
  const accepted: string[] = [];
  for (const h of [...HOSTILE_STRINGS, ...SUDOERS_HOSTILE_STRINGS]) {
    for (const [field, place] of PRIVILEGE_PLACES) {
      for (const value of [h.value, `a${h.value}`]) {
        total++;
        const content = { entries: [place(value)] };
        const found = issues("Privilege", content);
        if (found.length) {
          refused++;
          assert.ok(
            found.some((i) =>
              i.field === field || i.field === "" || (h.value === "" && i.field.startsWith("entries[0]."))
            ),
            `${h.name} in ${field}: ${JSON.stringify(found)}`,
          );
          continue;
        }
        const merge = mergePrivilege([input("p", 0, content)]);
        const sudoers = renderSudoers(merge, ["sudo"]);
        const grants = sudoers.split("\n").filter((l) => l && !l.startsWith("#"));
        assert.equal(grants.length, 1, `${h.name} in ${field} makes exactly one line: ${sudoers}`);
        const identities = administrators(merge, ["sudo"]).map((a) => `unix-${a.kind}:${a.name}`);
        const polkit = renderPolkitAdminRule(identities);
        checkPolkitAdminScript(polkit, identities.length);
        assert.match(polkit, /^[\x20-\x7e\n]*$/, `${h.name} in ${field} leaves printable ASCII only`);
        accepted.push(sudoers);
      }
    }
  }
  assert.ok(refused > total * 0.8, `${refused} of ${total} refused`);
  for (const h of [...SUDOERS_HOSTILE_STRINGS, ...hostileStrings("sudoers")]) {
    assert.ok(
      issues("Privilege", { entries: [{ user: h.value, effect: 1 }] }).length > 0,
      `${h.name} as a user`,
    );
    assert.ok(
      issues("Privilege", { entries: [{ group: h.value, effect: 1 }] }).length > 0,
      `${h.name} as a group`,
    );
  }
  if (hasVisudo) {
    for (const text of new Set(accepted)) {
      const check = await visudo(text);
      assert.ok(check.ok, `${text}: ${check.words}`);
    }
  }
});

Deno.test("Scripts: validation names the field and the fix", () => {
  const ok = { name: "hello", trigger: "SCRIPT_TRIGGER_MACHINE_STARTUP", body: "echo hello\n" };
  assert.deepEqual(issues("Scripts", { scripts: [ok] }), []);
  assert.match(issues("Scripts", { scripts: [] })[0].message, /at least one setting \(a script\)/);
  const cases: [unknown, string, RegExp][] = [
    [{ ...ok, name: "" }, "scripts[0].name", /required/],
    [{ ...ok, name: "../x" }, "scripts[0].name", /letters, digits/],
    [{ ...ok, trigger: undefined }, "scripts[0].trigger", /choose when the script runs/],
    [{ ...ok, body: "  \n" }, "scripts[0].body", /must not be empty/],
    [{ ...ok, body: "echo a\r\necho b\r\n" }, "scripts[0].body", /Unix line ends/],
    [{ ...ok, body: "echo \u202eevil" }, "scripts[0].body", /bidirectional/],
    [{ ...ok, body: "x".repeat(64 * 1024 + 1) }, "", /too long|at most/],
    [{ ...ok, timeout_seconds: 3601 }, "scripts[0].timeout_seconds", /at most 3600/],
  ];
  for (const [script, field, message] of cases) {
    const found = issues("Scripts", { scripts: [script] });
    assert.ok(
      found.some((i) => (field === "" || i.field === field) && message.test(i.message)),
      `${JSON.stringify(script).slice(0, 80)}: ${JSON.stringify(found)}`,
    );
  }
  const twice = issues("Scripts", { scripts: [ok, { ...ok }] });
  assert.equal(twice[0].field, "scripts[1].name");
  assert.match(twice[0].message, /unique/);
  assert.match(
    issues("Scripts", { scripts: [ok], signature: { value: "not base64!" } })[0].message,
    /base64/,
  );
});

Deno.test("Scripts: hostile names are refused; hostile bodies are refused or travel inert (base64) in the unit", async () => {
  const base = { trigger: 1, body: "echo ok\n" };
  let refusedNames = 0;
  for (const h of HOSTILE_STRINGS) {
    const found = issues("Scripts", { scripts: [{ ...base, name: `a${h.value}` }] });
    if (found.length) refusedNames++;
    else assert.match(`a${h.value}`, /^[A-Za-z0-9._-]+$/, `${h.name} accepted as a name`);
  }
  assert.ok(refusedNames > HOSTILE_STRINGS.length * 0.9, `${refusedNames} names refused`);
  const policy = { id: "p-1", name: "p", type: "Scripts", version: 1, priority: 0, content: "" };
  for (const h of HOSTILE_STRINGS) {
    const body = `echo ${h.value}\n`;
    const found = issues("Scripts", { scripts: [{ ...base, name: "s", body }] });
    if (found.length) {
      assert.ok(
        found.some((i) => i.field === "scripts[0].body" || i.field === ""),
        `${h.name}: ${JSON.stringify(found)}`,
      );
      continue;
    }
    const script = create(ScriptsPolicySchema, { scripts: [{ name: "s", trigger: 1, body }] }).scripts[0];
    const unit = await renderScriptUnit(policy, script, 0);
    for (const line of unit.text.split("\n")) {
      assert.match(
        line,
        /^(?:#.*|\[(?:Unit|Service)\]|[A-Za-z]+=[\x20-\x7e]*|)$/,
        `${h.name}: unit line ${line}`,
      );
    }
    const data = unit.text.split("\n").filter((l) => l.startsWith("StandardInputData=")).map((l) =>
      Uint8Array.from(atob(l.slice("StandardInputData=".length)), (c) => c.charCodeAt(0))
    );
    const joined = new Uint8Array(data.reduce((n, d) => n + d.length, 0));
    let at = 0;
    for (const d of data) joined.set(d, (at += d.length) - d.length);
    assert.equal(new TextDecoder().decode(joined), body, `${h.name}: the unit carries the body unchanged`);
  }
});
