/**
 * A hung replica is left quickly. Two real svc-server replicas on one PostgreSQL database sit behind a
 * round-robin TCP balancer (as a load balancer without health checks would: new connections alternate); a real
 * svc-agent streams through it with `server.silence_timeout_seconds: 15`. The replica holding the agent's
 * stream is frozen with SIGSTOP (process alive, sockets open, nothing answered): the agent's keepalive ping goes
 * unanswered, it gives the connection up and reconnects through the balancer to the healthy replica, where a
 * change then reaches it, and the console shows the node online there. Before this, the agent pinged every
 * 60 s with a 20 s timeout, so a frozen replica kept its agents for 80 s.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { stringify } from "yaml";
import { freshDb, TEST_DATABASE_URL } from "../helpers/db.ts";
import { freePort, type ServerProcess } from "../helpers/process.ts";
import {
  type AgentProcess,
  bindReleasedPolicy,
  enrollIntoNewGroup,
  eventually,
  spawnAgent,
} from "../helpers/agent_process.ts";
import { LOADED_MACHINE_DEADLINE_MS, login, startReplica } from "../helpers/replicas.ts";
import { loadOrCreateCa } from "../../server/pki/mod.ts";
import type { AgentStatus } from "../../agent/status.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

/** New connections alternate between the backends; each connection remembers its backend. */
function roundRobin(backends: number[]): { port: number; open: Map<Deno.Conn, number>; close(): void } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: freePort() });
  const open = new Map<Deno.Conn, number>();
  let next = 0;
  const conns = new Set<Deno.Conn>();
  (async () => {
    for await (const conn of listener) {
      const backend = backends[next++ % backends.length];
      conns.add(conn);
      (async () => {
        let upstream: Deno.Conn | undefined;
        try {
          upstream = await Deno.connect({ hostname: "127.0.0.1", port: backend });
          conns.add(upstream);
          open.set(conn, backend);
          await Promise.all([
            conn.readable.pipeTo(upstream.writable).catch(() => {}),
            upstream.readable.pipeTo(conn.writable).catch(() => {}),
          ]);
        } catch {
          // The agent or the replica went away.
        } finally {
          open.delete(conn);
          for (const c of [conn, upstream]) {
            try {
              c?.close();
            } catch { /* closed */ }
            if (c) conns.delete(c);
          }
        }
      })();
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    open,
    close() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
    },
  };
}

/** The process and every descendant (the policy workers serve the policy port), deepest first. */
async function processTree(pid: number): Promise<number[]> {
  const children = (await Deno.readTextFile(`/proc/${pid}/task/${pid}/children`).catch(() => ""))
    .trim().split(/\s+/).filter(Boolean).map(Number);
  const below = (await Promise.all(children.map(processTree))).flat();
  return [...below, pid];
}

/** SIGSTOP or SIGCONT to a whole replica: frozen, its sockets stay open and nothing answers. */
async function signalReplica(proc: ServerProcess, signal: "SIGSTOP" | "SIGCONT"): Promise<void> {
  for (const pid of await processTree(proc.pid)) {
    try {
      Deno.kill(pid, signal);
    } catch { /* ended */ }
  }
}

Deno.test({
  name: "a replica frozen with SIGSTOP: its agent reconnects to the healthy one within the silence timeout",
  ignore: !TEST_DATABASE_URL,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const info = await freshDb("postgres");
    await info.db.close();
    const tmp = await Deno.makeTempDir({ prefix: "svc-hung-" });
    const procs: ServerProcess[] = [];
    let agent: AgentProcess | undefined;
    let balancer: ReturnType<typeof roundRobin> | undefined;
    const closers: (() => void)[] = [];
    try {
      await loadOrCreateCa({ dataDir: tmp });
      const caFile = join(tmp, "pki/ca/ca.crt");
      const caPem = await Deno.readTextFile(caFile);
      const config = {
        database: { url: info.url },
        ca: {
          cert_file: caFile,
          key_file: join(tmp, "pki/ca/ca.key"),
          key_encryption_key_file: join(tmp, "k"),
        },
        server: { address: "127.0.0.1", hostnames: ["localhost"], replica_timeout_seconds: 5 },
      };
      const a = await startReplica("A", { caPem, config });
      procs.push(a);
      const b = await startReplica("B", { caPem, config });
      procs.push(b);
      balancer = roundRobin([a.policyPort, b.policyPort]);
      const apiA = await login(a, caPem, await a.adminPassword());
      closers.push(() => apiA.close());
      const apiB = await login(b, caPem, await a.adminPassword());
      closers.push(() => apiB.close());

      const root = join(tmp, "root");
      await Deno.mkdir(`${root}/usr/lib/firefox`, { recursive: true });
      const statusFile = join(tmp, "status.json");
      const configPath = join(tmp, "agent.yaml");
      await Deno.writeTextFile(
        configPath,
        stringify({
          server: {
            address: "localhost",
            enrollment_port: a.webPort,
            policy_port: balancer.port,
            silence_timeout_seconds: 15,
          },
          agent: { client_id: "hung-node", root_dir: root, status_file: statusFile },
          enrollment: { data_dir: join(tmp, "agent-data") },
          log: { level: "debug" },
        }),
      );
      await Deno.chmod(configPath, 0o600);
      const env = { SSL_CERT_FILE: caFile, SVC_ENROLLMENT_TOKEN: "" };
      const groupId = await enrollIntoNewGroup(apiA, {
        groupName: "hung lab",
        configPath,
        env,
        tokenFile: join(tmp, "token"),
      });
      await bindReleasedPolicy(apiA, {
        groupId,
        name: "hung firefox",
        content: { DisableTelemetry: true },
        priority: 1,
      });
      agent = spawnAgent(configPath, env);
      const status = async () => JSON.parse(await Deno.readTextFile(statusFile)) as AgentStatus;
      const policiesFile = `${root}/etc/firefox/policies/policies.json`;
      await eventually(
        async () => {
          const text = await Deno.readTextFile(policiesFile).catch(() => "");
          return text && (await status()).connection.state === "connected";
        },
        LOADED_MACHINE_DEADLINE_MS,
        "the agent connected and enforcing",
        agent.output,
      );

      // Freeze the replica that holds the agent's stream.
      const holding = [...balancer.open.values()];
      assert.equal(holding.length, 1, `one connection through the balancer: ${holding}`);
      const [hung, healthy, healthyApi] = holding[0] === a.policyPort ? [a, b, apiB] : [b, a, apiA];
      const nodeId = (await healthyApi.call("GET", "/api/v1/nodes?search=hung-node")).items[0].id;
      const frozenAt = Date.now();
      await signalReplica(hung, "SIGSTOP");
      const moved = await eventually(
        async () => {
          const s = await status();
          const since = Date.parse(s.connection.since);
          const through = [...balancer!.open.values()];
          return s.connection.state === "connected" && since > frozenAt &&
              through.includes(healthy.policyPort)
            ? since
            : undefined;
        },
        LOADED_MACHINE_DEADLINE_MS,
        "the agent connected to the healthy replica",
        agent.output,
      );
      const seconds = (moved - frozenAt) / 1000;
      console.log(
        `agent left the frozen replica and was in sync on the healthy one after ${seconds.toFixed(1)} s`,
      );
      // The old keepalive (ping every 60 s, 20 s timeout) could not leave before 80 s.
      assert.ok(seconds < 60, `${seconds} s`);
      assert.match(agent.output(), /keepalive|did not answer|disconnected/i);

      // A change made through the healthy replica reaches the agent there.
      await bindReleasedPolicy(healthyApi, {
        groupId,
        name: "hung pocket",
        content: { DisablePocket: true },
        priority: 2,
      });
      await eventually(
        async () => {
          const text = await Deno.readTextFile(policiesFile).catch(() => "{}");
          return JSON.parse(text).policies?.DisablePocket === true;
        },
        LOADED_MACHINE_DEADLINE_MS,
        "the change through the healthy replica applied",
        agent.output,
      );

      // The console (read from the healthy replica) shows the node online where it really is, also after the
      // frozen replica has been declared dead and its streams' nodes marked offline.
      await new Promise((r) => setTimeout(r, 8_000));
      await eventually(
        async () => {
          const n = await healthyApi.call("GET", `/api/v1/nodes/${nodeId}`);
          return n.status === "online";
        },
        LOADED_MACHINE_DEADLINE_MS,
        "the node online on the healthy replica",
        agent.output,
      );
      await signalReplica(hung, "SIGCONT");
    } finally {
      await agent?.stop();
      while (closers.length) closers.pop()!();
      balancer?.close();
      for (const p of procs) await signalReplica(p, "SIGCONT");
      for (const p of procs) await p.stop("SIGKILL");
      for (const p of procs) await Deno.remove(p.dataDir, { recursive: true }).catch(() => {});
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
      await info.dispose().catch(() => {});
    }
  },
});
