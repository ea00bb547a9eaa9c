/**
 * svc-agent end to end with real processes: `svc-server` on PGlite and `svc-agent` with a temp
 * root, talking over real TLS. Token from REST → enrollment (exits with next steps) → daemon →
 * node online → released Firefox policies bound and enabled → merged policies.json → COMPLIANT
 * with items over REST → hand edit restored, tamper event audited, compliance again → bindings
 * disabled, original restored → agent restart gets a full snapshot, node offline while stopped →
 * server killed mid-stream, agent reconnects with backoff and converges → a certificate
 * expiring in 10 days is renewed at start → a revoked agent cannot connect.
 */
import assert from "node:assert/strict";
import {
  e2eNode,
  e2eServer,
  endE2e,
  ORIGINAL_POLICIES as ORIGINAL,
  POLICIES_JSON,
} from "../helpers/agent_fixtures.ts";
import { join } from "node:path";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import {
  type AgentProcess,
  Api,
  bindReleasedPolicy,
  eventually,
  type Json,
  runAgentOnce,
  spawnAgent,
} from "../helpers/agent_process.ts";
import { openPglite } from "../../server/db/mod.ts";
import type { Ca } from "../../server/pki/mod.ts";
import { loadSharedCa } from "../../server/pki/ca_store.ts";
import { openSecretStore } from "../../server/pki/secret_store.ts";
import { generateKeyAndCsr, parseCertificate } from "../../shared/pki/csr.ts";
import { createPolicyClient } from "../../agent/client.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import { FIREFOX_MARKER_KEY } from "../../agent/enforcers/firefox.ts";
import { VERSION } from "../../shared/version.ts";
import { storySteps } from "../helpers/steps.ts";

const NODE = "e2e-node-1";
const DAY_MS = 86_400_000;

async function readText(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch {
    return undefined;
  }
}

async function nodeByName(api: Api): Promise<Json | undefined> {
  const page = await api.call("GET", `/api/v1/nodes?search=${NODE}`);
  return page.items.find((n: Json) => n.name === NODE);
}

async function waitNodeStatus(api: Api, status: string, agent?: AgentProcess): Promise<Json> {
  return await eventually(
    async () => {
      const node = await nodeByName(api);
      return node?.status === status ? node : undefined;
    },
    30_000,
    `node ${status}`,
    agent?.output,
  );
}

Deno.test({
  name: "svc-agent end to end: enroll, enforce Firefox, tamper, reconnect, restart, renew, revoke",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const { base, root, agentData, configPath, policiesFile } = await e2eNode("svc-e2e-agent-", {
      original: ORIGINAL,
    });
    await Deno.writeTextFile(`${root}/etc/machine-id`, "0123456789abcdef0123456789abcdef\n");
    // This machine's real polkit actions and GSettings schemas, when it has them, feed the catalogues.
    const catalogues: string[] = [];
    const sources = {
      "polkit action": "/usr/share/polkit-1/actions",
      "GSettings schema": "/usr/share/glib-2.0/schemas",
    };
    for (const [name, dir] of Object.entries(sources)) {
      const files = await Array.fromAsync(Deno.readDir(dir)).catch(() => []);
      if (files.length === 0) continue;
      catalogues.push(name);
      await Deno.mkdir(`${root}${dir}`, { recursive: true });
      for (const e of files) {
        if (e.isFile && /\.(policy|xml)$/.test(e.name)) {
          await Deno.copyFile(`${dir}/${e.name}`, `${root}${dir}/${e.name}`);
        }
      }
    }
    await Deno.mkdir(`${root}/usr/share/wayland-sessions`, { recursive: true });
    await Deno.writeTextFile(
      `${root}/usr/share/wayland-sessions/gnome.desktop`,
      "[Desktop Entry]\nName=GNOME\nDesktopNames=GNOME\n",
    );

    const started = await e2eServer({ base, root, agentData, configPath, policiesFile }, { clientId: NODE });
    let server: ServerProcess | undefined = started.server;
    let api: Api | undefined = started.api;
    let agent: AgentProcess | undefined;
    const { ports, dataDir, agentEnv } = started;
    const restartServer = async () => {
      api?.close();
      server = await startServerProcess({ dataDir, ports });
      api = await Api.login(server);
    };

    const step = storySteps(t);
    try {
      let groupId = "";
      let nodeId = "";
      const bindings: string[] = [];
      const policyIds: Record<string, string> = {};

      await step("token from REST → enrollment exits with next steps", async () => {
        const group = await api!.call("POST", "/api/v1/node-groups", { name: "e2e desktops" });
        groupId = group.id;
        const { token } = await api!.call("POST", `/api/v1/node-groups/${groupId}/tokens`);
        const tokenFile = join(base, "token");
        await Deno.writeTextFile(tokenFile, `${token}\n`);
        const result = await runAgentOnce(configPath, agentEnv, ["--token-file", tokenFile]);
        assert.equal(result.code, 0, result.stderr);
        assert.match(result.stdout, /Enrolled node "e2e-node-1"/);
        assert.match(result.stdout, /systemctl enable --now svc-agent/);
        assert.equal((await Deno.stat(agentData)).mode! & 0o777, 0o750);
        assert.equal((await Deno.stat(join(agentData, "agent.key"))).mode! & 0o777, 0o600);
        const cert = parseCertificate(await Deno.readTextFile(join(agentData, "agent.crt")));
        assert.equal(cert.commonName, NODE);
        assert.ok(cert.notAfter.getTime() - Date.now() > 89 * DAY_MS);
        // The token is single use: a second enrollment with it fails and names the cause.
        const keyBefore = await Deno.readTextFile(join(agentData, "agent.key"));
        const again = await runAgentOnce(configPath, agentEnv, ["--token-file", tokenFile]);
        assert.equal(again.code, 1);
        assert.match(again.stderr, /refused the enrollment token/);
        assert.match(again.stderr, /replaced once it succeeds/);
        // The failed attempt left the node's identity in place.
        assert.equal(await Deno.readTextFile(join(agentData, "agent.key")), keyBefore);
        // Re-enroll properly: the node was deleted, so a token of its group enrolls it again.
        const fresh = await api!.call("POST", `/api/v1/node-groups/${groupId}/tokens`);
        const node = await nodeByName(api!);
        await api!.call("DELETE", `/api/v1/nodes/${node.id}`);
        await Deno.writeTextFile(tokenFile, fresh.token);
        const third = await runAgentOnce(configPath, agentEnv, ["--token-file", tokenFile]);
        assert.equal(third.code, 0, third.stderr);
      });

      await step(
        "daemon starts, the node comes online with its heartbeat facts; metadata on request",
        async () => {
          agent = spawnAgent(configPath, agentEnv);
          const node = await waitNodeStatus(api!, "online", agent);
          nodeId = node.id;
          assert.deepEqual(node.groups.map((g: Json) => g.id), [groupId]);
          const full = await eventually(
            async () => {
              const n = await api!.call("GET", `/api/v1/nodes/${nodeId}`);
              return n.machine_id ? n : undefined;
            },
            15_000,
            "the heartbeat",
            agent.output,
          );
          assert.equal(full.machine_id, "0123456789abcdef0123456789abcdef");
          assert.equal(full.os_name, "Debian GNU/Linux");
          assert.equal(full.os_version, "12");
          assert.deepEqual(full.desktop_environments, ["GNOME"]);
          assert.equal(full.agent_version, VERSION);
          const mark = agent.output().length;
          await api!.call("POST", `/api/v1/nodes/${nodeId}/metadata-request`);
          await agent.waitForLog(/metadata requested by the server/, 15_000, mark);
          await eventually(
            async () => {
              const n = await api!.call("GET", `/api/v1/nodes/${nodeId}`);
              return Date.parse(n.last_seen) > Date.parse(full.last_seen);
            },
            15_000,
            "a fresh heartbeat",
            agent.output,
          );
          // Nothing is bound yet: the original file is untouched.
          assert.equal(await Deno.readTextFile(policiesFile), ORIGINAL);
        },
      );

      await step(
        "released Firefox policies bound and enabled → merged policies.json, COMPLIANT with items",
        async () => {
          const create = async (name: string, content: Json, priority: number) => {
            const { policyId, bindingId } = await bindReleasedPolicy(api!, {
              groupId,
              name,
              content,
              priority,
            });
            bindings.push(bindingId);
            policyIds[name] = policyId;
          };
          await create("Baseline", {
            DisableTelemetry: true,
            DisplayMenuBar: "never",
            Extensions: { Install: ["https://addons.example/a.xpi"] },
          }, 10);
          await create("Team", {
            DisplayMenuBar: "always",
            BlockAboutConfig: true,
            Extensions: { Install: ["https://addons.example/b.xpi"] },
          }, 20);
          const expected = {
            BlockAboutConfig: true,
            DisableTelemetry: true,
            DisplayMenuBar: "always",
            Extensions: { Install: ["https://addons.example/b.xpi", "https://addons.example/a.xpi"] },
          };
          await eventually(
            async () => {
              const text = await readText(policiesFile);
              const parsed = text ? JSON.parse(text) : undefined;
              return parsed && FIREFOX_MARKER_KEY in parsed &&
                JSON.stringify(parsed.policies) === JSON.stringify(expected);
            },
            30_000,
            "the merged policies.json",
            agent!.output,
          );

          const compliance = await eventually(
            async () => {
              const c = await api!.call("GET", `/api/v1/nodes/${nodeId}/compliance`);
              return c.results.length === 2 && c.results.every((r: Json) => r.status === "compliant")
                ? c
                : undefined;
            },
            30_000,
            "COMPLIANT results",
            agent!.output,
          );
          const baseline = compliance.results.find((r: Json) => r.policy_id === policyIds.Baseline);
          const menu = baseline.items.find((i: Json) => i.key === "DisplayMenuBar");
          assert.equal(menu.status, "inapplicable");
          assert.match(menu.message, /overridden by higher-priority policy "Team"/);
          assert.equal(baseline.items.find((i: Json) => i.key === "DisableTelemetry").status, "compliant");
          const team = compliance.results.find((r: Json) => r.policy_id === policyIds.Team);
          assert.ok(team.items.length >= 3 && team.items.every((i: Json) => i.status === "compliant"));
          assert.equal(team.items[0].schema_id, POLICIES_JSON);
        },
      );

      await step(
        "hand edit → restored within seconds, tamper_detected audited, compliance again",
        async () => {
          const managed = await Deno.readTextFile(policiesFile);
          const before = await api!.call("GET", `/api/v1/nodes/${nodeId}/compliance`);
          const reportedBefore = Math.max(...before.results.map((r: Json) => Date.parse(r.reported_at)));
          await new Promise((r) => setTimeout(r, 2200)); // past the own-write suppression window
          const started = Date.now();
          await Deno.writeTextFile(policiesFile, '{"policies": {"BlockAboutConfig": false}}\n');
          await eventually(
            async () => (await readText(policiesFile)) === managed,
            10_000,
            "the restore",
            agent!.output,
          );
          assert.ok(Date.now() - started < 10_000);
          const audit = await eventually(
            async () => {
              const page = await api!.call("GET", "/api/v1/audit-logs?action=tamper_detected");
              return page.items.length ? page : undefined;
            },
            15_000,
            "the tamper audit row",
            agent!.output,
          );
          const row = audit.items[0];
          assert.equal(row.resource_type, "managed_file");
          assert.equal(row.resource_id, POLICIES_JSON);
          assert.equal(row.node_id, nodeId);
          assert.equal(row.details.policy_type, "Firefox");
          assert.ok(Array.isArray(row.details.processes));
          await eventually(
            async () => {
              const after = await api!.call("GET", `/api/v1/nodes/${nodeId}/compliance`);
              return after.results.every((r: Json) =>
                Date.parse(r.reported_at) > reportedBefore && r.status === "compliant"
              );
            },
            15_000,
            "compliance reported again",
            agent!.output,
          );
        },
      );

      await step("bindings disabled → the original file is restored", async () => {
        for (const id of bindings) {
          await api!.call("PUT", `/api/v1/policy-bindings/${id}`, { state: "disabled" });
        }
        await eventually(
          async () => (await readText(policiesFile)) === ORIGINAL,
          30_000,
          "the original",
          agent!.output,
        );
      });

      await step("agent stopped → node offline; restarted → full snapshot and compliance", async () => {
        await api!.call("PUT", `/api/v1/policy-bindings/${bindings[1]}`, { state: "enabled" });
        await eventually(
          async () => {
            const parsed = JSON.parse(await readText(policiesFile) ?? "{}");
            return parsed.policies?.BlockAboutConfig === true;
          },
          30_000,
          "the Team policy",
          agent!.output,
        );
        assert.equal(await agent!.stop(), 0);
        await waitNodeStatus(api!, "offline");
        const stoppedAt = Date.now();
        agent = spawnAgent(configPath, agentEnv);
        await agent.waitForLog(/last_revision=0/);
        await agent.waitForLog(/snapshot complete policies=1/);
        await waitNodeStatus(api!, "online", agent);
        await eventually(
          async () => {
            const c = await api!.call("GET", `/api/v1/nodes/${nodeId}/compliance`);
            const r = c.results.find((x: Json) => x.policy_id === policyIds.Team);
            return r && Date.parse(r.reported_at) > stoppedAt && r.status === "compliant";
          },
          30_000,
          "compliance after restart",
          agent.output,
        );
      });

      await step("server killed mid-stream → agent reconnects with backoff and converges", async () => {
        for (const name of catalogues) await agent!.waitForLog(new RegExp(`${name} catalogue reported`));
        const mark = agent!.output().length;
        await server!.stop("SIGKILL");
        await agent!.waitForLog(/reconnect_in_ms=1000/, 15_000, mark);
        await agent!.waitForLog(/reconnect_in_ms=2000/, 15_000, mark);
        await restartServer();
        await waitNodeStatus(api!, "online", agent);
        const delays = [...agent!.output().slice(mark).matchAll(/reconnect_in_ms=(\d+)/g)].map((m) =>
          Number(m[1])
        );
        assert.deepEqual(delays.slice(0, 3), [1000, 2000, 4000].slice(0, Math.min(3, delays.length)));
        // Converges on the server's current state: enable the other binding again.
        await api!.call("PUT", `/api/v1/policy-bindings/${bindings[0]}`, { state: "enabled" });
        await eventually(
          async () => {
            const parsed = JSON.parse(await readText(policiesFile) ?? "{}");
            return parsed.policies?.DisableTelemetry === true && parsed.policies?.DisplayMenuBar === "always";
          },
          30_000,
          "convergence after reconnect",
          agent!.output,
        );
        // Catalogues went out once in this process and not again on reconnect.
        const output = agent!.output();
        for (const name of catalogues) {
          assert.equal(output.match(new RegExp(`${name} catalogue reported`, "g"))?.length, 1, name);
        }
        // A healthy stream reset the backoff: the next break waits 1 s again.
        const mark2 = agent!.output().length;
        await server!.stop("SIGKILL");
        await agent!.waitForLog(/reconnect_in_ms=1000/, 15_000, mark2);
        await restartServer();
        await waitNodeStatus(api!, "online", agent);
      });

      await step("a certificate expiring in 10 days is renewed at start", async () => {
        await agent!.stop();
        api!.close();
        api = undefined;
        await server!.stop();
        // Issue a 10-day certificate for the node with the server's own CA (kept in its database, sealed with
        // the data directory's key file) and register it.
        const db = await openPglite({ dataDir: join(dataDir, "db") });
        const keys = await generateKeyAndCsr(NODE);
        let short: Awaited<ReturnType<Ca["signCsr"]>>;
        try {
          const { ca } = await loadSharedCa({
            store: openSecretStore({ db, path: join(dataDir, "pki", "secrets.kek") }),
            dataDir,
          });
          short = await ca.signCsr(keys.csrPem, { commonName: NODE, validityDays: 10 });
          await db.query(
            "INSERT INTO node_certificates (serial, node_id, not_before, not_after) VALUES ($1, $2, $3, $4)",
            [short.serial, nodeId, short.notBefore, short.notAfter],
          );
          await db.query("UPDATE nodes SET cert_serial = $1, cert_not_after = $2 WHERE id = $3", [
            short.serial,
            short.notAfter,
            nodeId,
          ]);
        } finally {
          await db.close();
        }
        await Deno.writeTextFile(join(agentData, "agent.key"), keys.keyPem);
        await Deno.writeTextFile(join(agentData, "agent.crt"), short.certPem);
        await restartServer();
        agent = spawnAgent(configPath, agentEnv);
        await agent.waitForLog(/agent certificate renewed/);
        const renewed = parseCertificate(await Deno.readTextFile(join(agentData, "agent.crt")));
        assert.notEqual(renewed.serial, short.serial);
        assert.equal(renewed.commonName, NODE);
        assert.ok(renewed.notAfter.getTime() - Date.now() > 89 * DAY_MS);
        assert.notEqual(await Deno.readTextFile(join(agentData, "agent.key")), keys.keyPem);
        await waitNodeStatus(api!, "online", agent);
        const node = await api!.call("GET", `/api/v1/nodes/${nodeId}`);
        assert.equal(node.cert_serial, renewed.serial);
      });

      await step("a revoked agent cannot connect", async () => {
        const mark = agent!.output().length;
        await api!.call("POST", `/api/v1/nodes/${nodeId}/revoke`, { reason: "e2e" });
        // Its open stream is closed and every reconnect is refused.
        await agent!.waitForLog(/the server refuses this node's certificate.*revoked/, 15_000, mark);
        const identity = {
          keyPem: await Deno.readTextFile(join(agentData, "agent.key")),
          certPem: await Deno.readTextFile(join(agentData, "agent.crt")),
          caPem: await Deno.readTextFile(join(agentData, "ca.crt")),
        };
        const client = createPolicyClient("localhost", ports.policy, identity);
        try {
          await assert.rejects(
            client.heartbeat({ clientId: NODE }, { deadline: Date.now() + 10_000 }),
            (err: unknown) => err instanceof GrpcError && /revoked/i.test(err.message),
          );
        } finally {
          client.close();
        }
      });
    } finally {
      await endE2e({ agent, api, server }, { base }, dataDir);
    }
  },
});
