/**
 * Audit entries in words (web/src/audit_text.ts): changes as before → after, sets as added/removed, policy
 * contents by setting, ids by the names the server resolved (the id once the thing is gone), and the other
 * details the routes record.
 */
import assert from "node:assert/strict";
import { auditSummary, changeLines } from "../../web/src/audit_text.ts";

const NODE = "0b8a2a3c-6a53-4b0f-9a4e-0e6f4f1a2b3c";
const GONE = "5d6e7f80-1a2b-4c3d-8e9f-0a1b2c3d4e5f";

Deno.test("changes read as before → after, sets as added and removed", () => {
  const entry = {
    details: {
      changes: {
        state: { from: "disabled", to: "enabled" },
        priority: { from: 0, to: 10 },
        permissions: { added: ["node:view"], removed: ["policy:edit"] },
        content: { added: ["DisableFirefoxStudies"], removed: [], changed: ["DisableTelemetry"] },
      },
    },
  };
  assert.equal(
    auditSummary(entry),
    "State: disabled → enabled; Priority: 0 → 10; Permissions: + node:view, − policy:edit; " +
      "Settings: + DisableFirefoxStudies, ~ DisableTelemetry",
  );
  assert.deepEqual(changeLines(entry).map((l) => [l.label, l.kind]), [
    ["State", "value"],
    ["Priority", "value"],
    ["Permissions", "set"],
    ["Settings", "set"],
  ]);
});

Deno.test("ids read as names while the thing exists, as the id once it is gone", () => {
  const names = { [NODE]: { type: "node", name: "ws-17" } };
  assert.equal(auditSummary({ details: { added: [NODE, GONE] }, names }), `added ws-17, ${GONE}`);
  assert.equal(auditSummary({ details: { node_id: NODE }, names }), "node ws-17");
});

Deno.test("state moves, versions, rollbacks, bulk counts and refusals", () => {
  assert.equal(auditSummary({ details: { from: "draft", to: "released" } }), "draft → released");
  assert.equal(
    auditSummary({ details: { from_version: 2, to_version: 3, restores_version: 1 } }),
    "version 2 → 3; restores version 1",
  );
  assert.equal(
    auditSummary({ details: { requested: 3, succeeded: 2, failed: 1 } }),
    "3 requested, 2 done, 1 failed",
  );
  assert.equal(
    auditSummary({ details: { bulk: true, group: "lab", left_groups: ["office"] } }),
    "to lab; left office",
  );
  assert.equal(
    auditSummary({ details: { bulk: true, error: "not_found", message: "node x not found" } }),
    "refused: node x not found",
  );
  assert.equal(auditSummary({ details: {} }), "");
});
