/**
 * The SessionAccess rule compiler against a straightforward reference: for random rule sets (users,
 * groups, allow/deny, windows across midnight, several policies in different time zones) and random
 * moments, `decide` must give the reference's answer. The reference reads each window directly
 * (start day, start and end on the clock, crossing midnight) with its own fixed-offset clock, sharing
 * no code with the compiler's bitmaps and Intl conversion.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  compileSessionAccess,
  decide,
  lockoutCheck,
  minutesUntilEnd,
  type PolicyInput,
  type RuleInput,
  type WindowInput,
} from "../../shared/session_access_rules.ts";

/** Zones with a fixed offset (minutes east of UTC), so the reference can compute local time alone. */
const ZONES: Record<string, number> = { "UTC": 0, "Etc/GMT-3": 180, "Etc/GMT+5": -300, "Asia/Kolkata": 330 };
const USERS = ["alice", "bob", "carol", "root"];
const GROUPS = ["kids", "staff"];

function local(instant: number, zone: string): { day: number; minute: number } {
  const d = new Date(instant + ZONES[zone] * 60_000);
  return { day: (d.getUTCDay() + 6) % 7, minute: d.getUTCHours() * 60 + d.getUTCMinutes() };
}

function hhmm(text: string): number {
  return Number(text.slice(0, 2)) * 60 + Number(text.slice(3));
}

function windowContains(w: WindowInput, at: { day: number; minute: number }): boolean {
  const s = hhmm(w.start);
  const e = hhmm(w.end);
  const days = w.days.length ? w.days : [1, 2, 3, 4, 5, 6, 7];
  return days.some((d) => {
    const sd = d - 1;
    if (e > s) return at.day === sd && at.minute >= s && at.minute < e;
    return (at.day === sd && at.minute >= s) || (at.day === (sd + 1) % 7 && at.minute < e);
  });
}

function referenceAllowed(policies: PolicyInput[], user: string, groups: string[], instant: number): boolean {
  if (user === "root") return true;
  const matching = policies.flatMap((p) =>
    p.rules.filter((r) => r.users.includes(user) || r.groups.some((g) => groups.includes(g)))
      .map((r) => ({ r, zone: p.timeZone }))
  );
  if (matching.length === 0) return true;
  const inside = ({ r, zone }: { r: RuleInput; zone: string }) =>
    r.windows.length === 0 || r.windows.some((w) => windowContains(w, local(instant, zone)));
  if (matching.some((m) => m.r.effect === 2 && inside(m))) return false;
  const allows = matching.filter((m) => m.r.effect === 1);
  return allows.length === 0 || allows.some(inside);
}

// A few fixed times mixed in make equal starts and ends (a whole day) and shared edges common.
const time = fc.oneof(
  fc.tuple(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 }))
    .map(([h, m]) => `${String(h).padStart(2, "0")}:${String(m).padStart(2, "0")}`),
  fc.constantFrom("00:00", "08:00", "22:00", "23:59"),
);
const windowArb: fc.Arbitrary<WindowInput> = fc.record({
  days: fc.uniqueArray(fc.integer({ min: 1, max: 7 }), { maxLength: 3 }),
  start: time,
  end: time,
});
const ruleArb: fc.Arbitrary<RuleInput> = fc.record({
  name: fc.constant(""),
  users: fc.uniqueArray(fc.constantFrom(...USERS), { maxLength: 2 }),
  groups: fc.uniqueArray(fc.constantFrom(...GROUPS), { maxLength: 1 }),
  effect: fc.constantFrom(1, 2),
  windows: fc.array(windowArb, { maxLength: 3 }),
});
const policyArb: fc.Arbitrary<PolicyInput> = fc.record({
  rules: fc.array(ruleArb, { minLength: 1, maxLength: 3 }),
  endAction: fc.constantFrom(0, 1, 2),
  warningMinutes: fc.uniqueArray(fc.integer({ min: 1, max: 120 }), { maxLength: 3 }),
  pamEnforcement: fc.boolean(),
  includeSsh: fc.boolean(),
  timeZone: fc.constantFrom(...Object.keys(ZONES)),
});
// Moments over several years, on and off minute boundaries.
const instantArb = fc.integer({ min: Date.UTC(2024, 0, 1), max: Date.UTC(2030, 0, 1) });
const subjectArb = fc.record({
  user: fc.constantFrom(...USERS, "dave"),
  groups: fc.uniqueArray(fc.constantFrom(...GROUPS), { maxLength: 2 }),
});

Deno.test("decide agrees with the reference for random rule sets, subjects and moments", () => {
  fc.assert(
    fc.property(
      fc.array(policyArb, { minLength: 1, maxLength: 3 }),
      subjectArb,
      fc.array(instantArb, {
        minLength: 1,
        maxLength: 8,
      }),
      (policies, subject, instants) => {
        const set = compileSessionAccess(
          policies.map((content, i) => ({ id: `p${i}`, name: `p${i}`, content })),
        );
        for (const instant of instants) {
          const expected = referenceAllowed(policies, subject.user, subject.groups, instant);
          assert.equal(decide(set, subject, instant).allowed, expected, new Date(instant).toISOString());
        }
      },
    ),
    { numRuns: 400 },
  );
});

Deno.test("minutesUntilEnd is the first minute the reference refuses", () => {
  fc.assert(
    fc.property(
      fc.array(policyArb, { minLength: 1, maxLength: 2 }),
      subjectArb,
      instantArb,
      (policies, subject, at) => {
        const set = compileSessionAccess(
          policies.map((content, i) => ({ id: `p${i}`, name: `p${i}`, content })),
        );
        const got = minutesUntilEnd(set, subject, at, 90);
        const base = Math.floor(at / 60_000) * 60_000;
        if (!referenceAllowed(policies, subject.user, subject.groups, at)) {
          assert.ok(got === 0 || got === undefined);
          return;
        }
        let expected: number | undefined;
        for (let k = 1; k <= 90; k++) {
          if (!referenceAllowed(policies, subject.user, subject.groups, base + k * 60_000)) {
            expected = k;
            break;
          }
        }
        assert.equal(got, expected);
      },
    ),
    { numRuns: 150 },
  );
});

const policy = (rules: RuleInput[], extra: Partial<PolicyInput> = {}): PolicyInput => ({
  rules,
  endAction: 0,
  warningMinutes: [],
  pamEnforcement: false,
  includeSsh: false,
  timeZone: "UTC",
  ...extra,
});

Deno.test("deny beats allow, midnight windows, root never restricted, union of warnings and end actions", () => {
  const set = compileSessionAccess([
    {
      id: "a",
      name: "evenings",
      content: policy([
        {
          name: "school",
          users: ["alice", "root"],
          groups: [],
          effect: 1,
          windows: [{ days: [5], start: "22:00", end: "02:00" }],
        },
      ], { warningMinutes: [10] }),
    },
    {
      id: "b",
      name: "blocks",
      content: policy([
        {
          name: "no-friday-late",
          users: [],
          groups: ["kids"],
          effect: 2,
          windows: [{ days: [6], start: "01:00", end: "01:30" }],
        },
      ], { endAction: 2 }),
    },
  ]);
  const friday2300 = Date.UTC(2026, 10, 27, 23, 0); // Friday
  const saturday0115 = Date.UTC(2026, 10, 28, 1, 15);
  const saturday0145 = Date.UTC(2026, 10, 28, 1, 45);
  const alice = { user: "alice", groups: ["kids"] };
  assert.equal(decide(set, alice, friday2300).allowed, true);
  assert.equal(decide(set, alice, saturday0145).allowed, true, "the window crosses midnight into Saturday");
  const denied = decide(set, alice, saturday0115);
  assert.equal(denied.allowed, false);
  assert.equal(denied.rule?.name, "no-friday-late");
  assert.equal(decide(set, { user: "alice", groups: [] }, saturday0115).allowed, true);
  assert.equal(decide(set, { user: "root", groups: ["kids"] }, saturday0115).allowed, true);
  assert.equal(decide(set, { user: "dave", groups: [] }, saturday0115).restricted, false);
  assert.deepEqual(set.warningMinutes, [30, 15, 10, 5]);
  assert.equal(set.endAction, "logout");
  assert.equal(minutesUntilEnd(set, alice, Date.UTC(2026, 10, 28, 0, 50), 60), 10);
  assert.throws(
    () => compileSessionAccess([{ id: "x", name: "x", content: policy([], { timeZone: "Mars/Olympus" }) }]),
    /time zone "Mars\/Olympus" is unknown/,
  );
});

Deno.test("lockout check finds the hours when no named account may log in, per time zone", () => {
  const set = compileSessionAccess([{
    id: "a",
    name: "office",
    content: policy([
      {
        name: "alice-days",
        users: ["alice"],
        groups: [],
        effect: 1,
        windows: [{ days: [], start: "08:00", end: "20:00" }],
      },
      {
        name: "bob-nights",
        users: ["bob"],
        groups: [],
        effect: 1,
        windows: [{ days: [], start: "18:00", end: "02:00" }],
      },
    ], { timeZone: "Europe/Berlin" }),
  }]);
  const report = lockoutCheck(set, { at: Date.UTC(2026, 10, 25, 12) });
  assert.equal(report.viewZone, "Europe/Berlin");
  // 02:00–08:00 every day nobody may log in.
  assert.equal(report.lockouts.length, 7);
  assert.deepEqual(report.lockouts[0], { from: 120, to: 480 });
  assert.deepEqual(report.timeline.find((t) => t.subject === "alice")!.allowed[0], { from: 480, to: 1200 });
  const open = compileSessionAccess([{
    id: "b",
    name: "deny-eve",
    content: policy([{
      name: "",
      users: ["eve"],
      groups: [],
      effect: 2,
      windows: [{ days: [1], start: "00:00", end: "00:00" }],
    }, {
      name: "",
      users: ["bob"],
      groups: [],
      effect: 1,
      windows: [],
    }]),
  }]);
  assert.deepEqual(lockoutCheck(open).lockouts, [], "bob may always log in");
});
