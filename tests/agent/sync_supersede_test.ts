/**
 * Compliance reports of a sync whose policies were replaced while it ran (a newer snapshot or update
 * arrived) are not sent: the follow-up run reports the current ones, so the server never sees a report of
 * a superseded version or of a policy that is gone.
 */
import assert from "node:assert/strict";
import type { CachedPolicy, Enforcer, PolicyResult } from "../../agent/sync/types.ts";
import { ManagedFiles } from "../../agent/sync/managed_files.ts";
import { SyncEngine } from "../../agent/sync/engine.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { Runner } from "../../agent/runner.ts";
import { tempNode } from "./helpers.ts";

function policy(id: string, version: number): CachedPolicy {
  return { id, name: id, type: "Slow", version, priority: 0, content: "{}" };
}

Deno.test("reports of a superseded snapshot are not sent; the follow-up run reports the current policies", async () => {
  const node = await tempNode();
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  let runs = 0;
  const slow: Enforcer = {
    type: "Slow",
    notifiesUsers: false,
    async sync(policies) {
      if (runs++ === 0) await gate;
      return {
        changed: [],
        policies: policies.map((p) => ({
          policyId: p.id,
          status: "COMPLIANT",
          message: `v${p.version}`,
          items: [],
        })),
      };
    },
  };
  const reports: { id: string; version: number; result: PolicyResult }[] = [];
  const engine = new SyncEngine({
    fs: node.fs,
    runner: new Runner(),
    logger: SILENT_LOGGER,
    config: node.config,
    managed: await ManagedFiles.load(node.dataDir, SILENT_LOGGER),
    enforcers: new Map([["Slow", slow]]),
    reportCompliance: (p, result) => {
      reports.push({ id: p.id, version: p.version, result });
      return Promise.resolve();
    },
  });
  try {
    engine.handleEvent({ kind: "SNAPSHOT", policy: policy("a", 1), snapshotComplete: false });
    engine.handleEvent({ kind: "SNAPSHOT", policy: policy("b", 1), snapshotComplete: true });
    // While the first run is held, a new snapshot replaces a (version 2) and drops b.
    while (runs === 0) await new Promise((r) => setTimeout(r, 5));
    engine.handleEvent({ kind: "SNAPSHOT", policy: policy("a", 2), snapshotComplete: true });
    release();
    await engine.idle();
    assert.deepEqual(reports.map((r) => `${r.id}@${r.version}`), ["a@2"]);
    assert.equal(reports[0].result.message, "v2");
  } finally {
    await node.cleanup();
  }
});
