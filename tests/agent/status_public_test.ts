/**
 * The status file any local user can read (`svc-agent status`) never carries a script's output: a Scripts
 * result keeps its exit code and unit, the output stays with the server's compliance report.
 */
import assert from "node:assert/strict";
import { publicMessage, StatusFile } from "../../agent/status.ts";
import type { SyncSummary } from "../../agent/sync/engine.ts";
import type { CachedPolicy, PolicyResult } from "../../agent/sync/types.ts";

const SECRET = "TOKEN=hunter2-secret";

Deno.test("a Scripts result's output is withheld from the world-readable status; other types keep their words", async () => {
  assert.equal(
    publicMessage("Scripts", `ran (exit 0) in svc-script-a.service; output: ${SECRET}`),
    "ran (exit 0) in svc-script-a.service (output withheld here; the console shows it)",
  );
  assert.equal(
    publicMessage("Scripts", `svc-script-b.service failed: exit 3: ${SECRET}; more`),
    "svc-script-b.service failed: exit 3 (output withheld here; the console shows it)",
  );
  assert.equal(
    publicMessage("Scripts", "svc-script-c.service: not run yet"),
    "svc-script-c.service: not run yet",
  );
  assert.equal(publicMessage("Dconf", `expected ${SECRET}`), `expected ${SECRET}`);

  const dir = await Deno.makeTempDir({ prefix: "svc-status-" });
  try {
    const logger = { info() {}, warn() {}, error() {}, debug() {} } as unknown as ConstructorParameters<
      typeof StatusFile
    >[1];
    const file = new StatusFile(`${dir}/status.json`, logger, { node: "n", server: "s", agentVersion: "1" });
    const policy = { id: "p1", name: "boot", type: "Scripts", version: 2, priority: 0 } as CachedPolicy;
    const result: PolicyResult = {
      policyId: "p1",
      status: "ERROR",
      message: `1 of 1 scripts failed: svc-script-b.service failed: exit 3: ${SECRET}`,
      items: [{
        schemaId: "boot",
        key: "b",
        status: "ERROR",
        message: `svc-script-b.service failed: exit 3: ${SECRET}`,
      }],
    };
    const summary = {
      changed: new Map(),
      managed: [],
      results: [{ policy, result }],
    } as unknown as SyncSummary;
    await file.evaluated(summary, "test", []);
    const text = await Deno.readTextFile(`${dir}/status.json`);
    assert.ok(!text.includes("hunter2"), text);
    assert.match(text, /exit 3 \(output withheld here/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
