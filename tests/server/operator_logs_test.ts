/**
 * What the server tells an operator besides the audit rows: one INFO line when an agent's policy stream
 * opens and one when it closes (node, replica, revision), one per revocation (and deletion, which revokes),
 * one per tamper event; and the
 * optional JSON line format (`log.format: json`) — one JSON object per line, details included, checked on
 * a real server process too.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createGroup, enrollAgent, eventually, startAgentServer, subscribe } from "../helpers/agents.ts";
import { expectStatus } from "./domain_helpers.ts";
import { domainRoutes } from "../../server/http/routes/mod.ts";
import { formatLogLine } from "../../server/core/log.ts";
import { startServerProcess } from "../helpers/process.ts";

dbTest("INFO lines for agent connect and disconnect, revocation and tamper events", async (db) => {
  const server = await startAgentServer(db, { logLevel: "info", routes: (ctx) => domainRoutes(ctx) });
  try {
    const logs = server.test.logs;
    const replica = server.ctx.replicaId;
    const group = await createGroup(db, "lab");
    const agent = await enrollAgent(server, { name: "pc-1", groupId: group });
    const stream = subscribe(agent.policy, { clientId: "pc-1" });
    await stream.nextSnapshot();
    const connected = `INFO agent connected node=pc-1 replica=${replica} revision=0`;
    assert.ok(logs.some((l) => l.endsWith(connected)), logs.join("\n"));
    stream.cancel();
    await eventually(
      () =>
        Promise.resolve(logs.some((l) => /INFO agent disconnected node=pc-1 replica=\S+ revision=0/.test(l))),
      { what: "the disconnect line", timeoutMs: 30_000 },
    );

    await agent.policy.reportTamperEvent({
      clientId: "pc-1",
      filePath: "/etc/firefox/policies/policies.json",
      policyType: "Firefox",
      processes: [{ pid: 4242, comm: "vim", user: "eve" }],
    });
    assert.ok(
      logs.some((l) =>
        l.includes(
          "INFO tamper event: a managed file was changed on the node and restored node=pc-1 " +
            "path=/etc/firefox/policies/policies.json policy_type=Firefox processes=vim[4242]",
        )
      ),
      logs.join("\n"),
    );

    const admin = await server.test.loginAs({ superAdmin: true, username: "ops" });
    expectStatus(
      await admin.request("POST", `/api/v1/nodes/${agent.nodeId}/revoke`, { reason: "stolen" }),
      200,
    );
    assert.ok(
      logs.some((l) => /INFO node revoked node=pc-1 serials=[0-9a-f]+ by=ops reason=stolen$/.test(l)),
    );
    expectStatus(await admin.request("DELETE", `/api/v1/nodes/${agent.nodeId}`), 204);
    assert.ok(logs.some((l) => /INFO node deleted; its certificates are revoked node=pc-1 by=ops$/.test(l)));
    agent.close();
  } finally {
    await server.stop();
  }
});

Deno.test("log.format json: one object per line with time, level, message and details", () => {
  const line = formatLogLine("json", {
    time: new Date("2026-01-02T03:04:05.000Z"),
    level: "warn",
    msg: "agent disconnected",
    fields: { node: "pc-1", revision: 7, error: new Error("gone"), msg: "clash", skipped: undefined },
  });
  assert.deepEqual(JSON.parse(line), {
    time: "2026-01-02T03:04:05.000Z",
    level: "warn",
    msg: "agent disconnected",
    node: "pc-1",
    revision: 7,
    error: "gone",
    msg_: "clash",
  });
  assert.equal(
    formatLogLine("text", {
      time: new Date(0),
      level: "info",
      msg: "m",
      fields: { a: "b c", n: 1, u: undefined },
    }),
    "1970-01-01T00:00:00.000Z INFO m a=b c n=1",
  );
});

Deno.test({
  name: "a real server with log.format json writes only JSON lines",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const server = await startServerProcess({ config: { log: { format: "json", level: "debug" } } });
    try {
      await server.stop();
      const lines = server.output().split("\n").filter((l) => l.trim() !== "");
      assert.ok(lines.length > 0);
      for (const line of lines) {
        const parsed = JSON.parse(line);
        assert.ok(parsed.time && parsed.level && parsed.msg, line);
      }
    } finally {
      await server.stop("SIGKILL");
      await Deno.remove(server.dataDir, { recursive: true }).catch(() => {});
    }
  },
});
