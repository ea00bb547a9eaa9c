/**
 * The SessionAccess lockout guard over REST: releasing a policy that alone locks all its accounts out at
 * some time, and enabling a binding whose group would then have nobody named able to log in, are
 * refused with the accounts and the times; a reason lets it through and lands in the audit log; the
 * timeline route shows who may log in when, alone and with a group's policies.
 */
import assert from "node:assert/strict";
import { expectStatus, putBinding } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

const rule = (
  users: string[],
  effect: string,
  windows: { start: string; end: string; days?: string[] }[],
) => ({
  users,
  effect,
  windows,
});

domain.domainTest(
  "SessionAccess lockout guard on release and on binding enablement, with audited override",
  async ({ db, admin }) => {
    const group = await domain.createGroup(admin, "classroom");
    // Days only: nobody named may log in 20:00–08:00.
    const days = await domain.createPolicy(admin, {
      name: "school days",
      type: "SessionAccess",
      content: JSON.stringify({
        time_zone: "Europe/Berlin",
        rules: [rule(["alice", "bob"], "SESSION_ACCESS_EFFECT_ALLOW", [{ start: "08:00", end: "20:00" }])],
      }),
    });
    const daysBinding = await domain.bind(admin, days.id, group);
    const refused = expectStatus(
      await admin.request("PUT", `/api/v1/policies/all/${days.id}/state`, { state: "released" }),
      409,
    );
    assert.match(
      refused.error.message,
      /releasing this policy would lock node group "classroom" out: none of the accounts the SessionAccess rules name \(alice, bob\) may log in Mon 00:00–Mon 08:00, Mon 20:00–Tue 08:00/,
    );
    assert.match(
      refused.error.message,
      /\(Europe\/Berlin\); check the rules, or confirm with a lockout_reason/,
    );
    const still = expectStatus(await admin.request("GET", `/api/v1/policies/all/${days.id}`), 200);
    assert.equal(still.state, "draft", "nothing changed");

    expectStatus(
      await admin.request("PUT", `/api/v1/policies/all/${days.id}/state`, {
        state: "released",
        lockout_reason: "x",
      }),
      400,
    );
    expectStatus(
      await admin.request("PUT", `/api/v1/policies/all/${days.id}/state`, {
        state: "released",
        lockout_reason: "night lock is intended; admins log in over ssh as root",
      }),
      200,
    );
    const [audit] = await db.query<{ details: Record<string, unknown> }>(
      `SELECT details FROM audit_logs WHERE action = 'policy.state_change' AND resource_id = $1 ORDER BY id DESC LIMIT 1`,
      [days.id],
    );
    assert.equal(
      (typeof audit.details === "string" ? JSON.parse(audit.details) : audit.details).lockout_override,
      "night lock is intended; admins log in over ssh as root",
    );

    // A policy that leaves carol always allowed passes; bound with the first, the group is fine too.
    const carol = await domain.createPolicy(admin, {
      name: "carol evenings",
      type: "SessionAccess",
      content: JSON.stringify({
        time_zone: "Europe/Berlin",
        rules: [rule(["carol"], "SESSION_ACCESS_EFFECT_ALLOW", [{ start: "19:00", end: "09:00" }])],
      }),
    });
    await domain.setState(admin, carol.id, "released");
    // The day policy alone would leave the nights empty: enabling it first needs a reason.
    expectStatus(
      await admin.request("PUT", `/api/v1/policy-bindings/${daysBinding}`, { state: "enabled" }),
      409,
    );
    await putBinding(admin, daysBinding, {
      state: "enabled",
      lockout_reason: "the evening policy for carol follows at once",
    });
    // carol covers 19:00–09:00, alice and bob 08:00–20:00: someone may always log in, no reason needed.
    await domain.bind(admin, carol.id, group, { enabled: true });

    // A deny for carol on Sundays opens a hole on Sunday night in this group only.
    const sunday = await domain.createPolicy(admin, {
      name: "no sunday nights",
      type: "SessionAccess",
      content: JSON.stringify({
        time_zone: "Europe/Berlin",
        rules: [
          rule(["carol"], "SESSION_ACCESS_EFFECT_DENY", [{
            days: ["WEEKDAY_SUNDAY"],
            start: "20:00",
            end: "23:00",
          }]),
        ],
      }),
    });
    await domain.setState(admin, sunday.id, "released");
    const sundayBinding = await domain.bind(admin, sunday.id, group);
    const blocked = expectStatus(
      await admin.request("PUT", `/api/v1/policy-bindings/${sundayBinding}`, { state: "enabled" }),
      409,
    );
    assert.match(
      blocked.error.message,
      /enabling this binding would lock node group "classroom" out: .*\(alice, bob, carol\) may log in Sun 20:00–Sun 23:00 \(Europe\/Berlin\)/,
    );
    const binding = expectStatus(
      await admin.request("GET", `/api/v1/policy-bindings/${sundayBinding}`),
      200,
    );
    assert.equal(binding.state, "disabled");

    const timeline = expectStatus(
      await admin.request(
        "GET",
        `/api/v1/session-access/timeline?policy_id=${sunday.id}&node_group_id=${group}`,
      ),
      200,
    );
    assert.equal(timeline.view_zone, "Europe/Berlin");
    assert.deepEqual(timeline.lockouts, [{ from: 6 * 1440 + 20 * 60, to: 6 * 1440 + 23 * 60 }]);
    assert.deepEqual(timeline.timeline.map((t: { subject: string }) => t.subject), [
      "alice",
      "bob",
      "carol",
    ]);
    const alone = expectStatus(
      await admin.request(
        "GET",
        `/api/v1/session-access/timeline?content=${
          encodeURIComponent(JSON.stringify({ rules: [rule(["dave"], "SESSION_ACCESS_EFFECT_DENY", [])] }))
        }`,
      ),
      200,
    );
    assert.equal(alone.lockouts.length, 1, "dave is denied all week");
    assert.deepEqual(alone.lockouts[0], { from: 0, to: 10080 });
    expectStatus(await admin.request("GET", "/api/v1/session-access/timeline"), 400);
    const bad = expectStatus(
      await admin.request(
        "GET",
        `/api/v1/session-access/timeline?content=${
          encodeURIComponent(JSON.stringify({ rules: [rule(["root"], "SESSION_ACCESS_EFFECT_DENY", [])] }))
        }`,
      ),
      422,
    );
    assert.match(bad.error.message, /root is never restricted/);

    await putBinding(admin, sundayBinding, {
      state: "enabled",
      lockout_reason: "the lab is closed on Sunday evenings",
    });
    const [bindingAudit] = await db.query<{ details: unknown }>(
      `SELECT details FROM audit_logs WHERE resource_type = 'binding' AND resource_id = $1 ORDER BY id DESC LIMIT 1`,
      [sundayBinding],
    );
    const details = typeof bindingAudit.details === "string"
      ? JSON.parse(bindingAudit.details)
      : bindingAudit.details;
    assert.equal(details.lockout_override, "the lab is closed on Sunday evenings");
  },
);
