/** Audit severity: what a SIEM sees as high must include every refused attempt on a disk recovery key. */
import assert from "node:assert/strict";
import { CEF_SEVERITY, severityOf } from "../../server/audit/severity.ts";

Deno.test("refused recovery-key reveals are high like the reveal itself; ordinary refusals stay medium", () => {
  const luks = { type: "luks_volume" };
  assert.equal(severityOf({ action: "disk_encryption.reveal", outcome: "success", resource: luks }), "high");
  assert.equal(severityOf({ action: "access_denied", outcome: "denied", resource: luks }), "high");
  assert.equal(severityOf({ action: "disk_encryption.rotate", outcome: "failure", resource: luks }), "high");
  assert.equal(severityOf({ action: "disk_encryption.rotate", outcome: "success", resource: luks }), "low");
  assert.equal(
    severityOf({ action: "access_denied", outcome: "denied", resource: { type: "policy" } }),
    "medium",
  );
  assert.equal(severityOf({ action: "policy.delete", outcome: "success" }), "medium");
  assert.equal(severityOf({ action: "tamper_detected", outcome: "success" }), "high");
  assert.equal(CEF_SEVERITY[severityOf({ action: "access_denied", outcome: "denied", resource: luks })], 8);
});
