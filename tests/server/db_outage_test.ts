/**
 * During a database outage the server says so: REST lists and login answer 503 "the database is
 * unreachable" with Retry-After, gRPC answers UNAVAILABLE, and everything works again once the database is
 * back, without a restart. Answers and metrics scrapes during a long outage stay fast (the database is known
 * down: nothing waits for a reconnection), and `svc_database_up` says 0, then 1. PostgreSQL is made unreachable for real (a TCP relay in front of it is shut and
 * every connection through it cut, then the database is renamed away); PGlite by closing it.
 */
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import postgres from "postgres";
import { freshDb, TEST_DATABASE_URL } from "../helpers/db.ts";
import { createGroup, enrollAgent, startAgentServer } from "../helpers/agents.ts";
import { type Db, openPostgres } from "../../server/db/mod.ts";
import type { TestResponse } from "../helpers/app.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import { collectDatabaseFamilies } from "../../server/metrics/collector.ts";

/** A TCP relay to PostgreSQL that can be shut (refusing new connections, cutting live ones) and reopened. */
function startRelay(target: { hostname: string; port: number }) {
  let listener: Deno.Listener | undefined;
  const live = new Set<Deno.Conn>();
  let port = 0;
  const serve = (l: Deno.Listener) => {
    (async () => {
      for await (const inbound of l) {
        let outbound: Deno.Conn;
        try {
          outbound = await Deno.connect(target);
        } catch {
          inbound.close();
          continue;
        }
        live.add(inbound);
        live.add(outbound);
        const pipe = async (from: Deno.Conn, to: Deno.Conn) => {
          try {
            await from.readable.pipeTo(to.writable);
          } catch {
            // cut
          }
          for (const c of [from, to]) {
            live.delete(c);
            try {
              c.close();
            } catch {
              // already closed
            }
          }
        };
        pipe(inbound, outbound);
        pipe(outbound, inbound);
      }
    })().catch(() => {});
  };
  const open = () => {
    listener = Deno.listen({ hostname: "127.0.0.1", port });
    port = (listener.addr as Deno.NetAddr).port;
    serve(listener);
  };
  open();
  return {
    get port() {
      return port;
    },
    down() {
      listener?.close();
      listener = undefined;
      for (const c of live) {
        try {
          c.close();
        } catch {
          // already closed
        }
      }
      live.clear();
    },
    up: open,
  };
}

function assertUnreachable(res: TestResponse, what: string): void {
  assert.equal(res.status, 503, `${what}: ${res.status} ${res.text}`);
  assert.equal(res.json.error.code, "database_unavailable", what);
  assert.match(res.json.error.message, /database is unreachable/, what);
  assert.ok(Number(res.headers.get("retry-after")) > 0, `${what}: Retry-After`);
  assert.ok(res.headers.get("content-security-policy"), `${what}: security headers`);
}

async function assertGrpcUnavailable(promise: Promise<unknown>, what: string): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof GrpcError, `${what}: expected a GrpcError, got ${err}`);
    assert.equal(err.code, grpc.status.UNAVAILABLE, `${what}: got ${grpc.status[err.code]} ${err.message}`);
    return true;
  });
}

async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Runs the outage scenario on `db`; `outage` makes the database unreachable, `recover` (if any) brings it back. */
async function outageScenario(db: Db, outage: () => Promise<void>, recover?: () => Promise<void>) {
  const server = await startAgentServer(db);
  try {
    const admin = await server.test.loginAs({
      superAdmin: true,
      username: "outage-admin",
      password: "pw-outage-0123456789",
    });
    const group = await createGroup(db, "outage");
    const agent = await enrollAgent(server, { name: "outage-pc", groupId: group });
    try {
      assert.ok((await agent.policy.getAgentConfig({ clientId: "outage-pc" })).config);
      await outage();
      for (
        const path of ["/api/v1/users", "/api/v1/users?search=x", "/api/v1/user-groups", "/api/v1/audit-logs"]
      ) {
        assertUnreachable(await admin.request("GET", path), `GET ${path}`);
      }
      assertUnreachable(await admin.request("POST", "/api/v1/user-groups", { name: "during" }), "POST");
      // Bounded, not slow: each answer of a long outage comes without waiting for a reconnection (postgres.js
      // waited longer before each attempt, up to 10–20 s), and so does a metrics scrape. The bound is
      // generous for a loaded machine; the point is that it does not grow.
      for (let i = 0; i < 12; i++) {
        const started = performance.now();
        assertUnreachable(await admin.request("GET", "/api/v1/users"), `GET ${i}`);
        const took = performance.now() - started;
        assert.ok(took < 5000, `answer ${i} of the outage took ${Math.round(took)} ms`);
      }
      const scrapeStarted = performance.now();
      const during = await collectDatabaseFamilies(db, server.ctx.log);
      const scrapeTook = performance.now() - scrapeStarted;
      assert.ok(scrapeTook < 5000, `the scrape took ${Math.round(scrapeTook)} ms`);
      assert.deepEqual(during.map((f) => [f.name, f.samples.map((x) => x.value)]), [["svc_database_up", [
        0,
      ]]]);
      const login = await server.test.anonymous().request("POST", "/api/v1/auth/login", {
        username: "outage-admin",
        password: "pw-outage-0123456789",
      });
      assertUnreachable(login, "login");
      await assertGrpcUnavailable(agent.policy.getAgentConfig({ clientId: "outage-pc" }), "GetAgentConfig");
      if (!recover) return;
      await recover();
      await eventually(async () => (await admin.request("GET", "/api/v1/users")).status === 200, "REST back");
      await eventually(
        async () => !!(await agent.policy.getAgentConfig({ clientId: "outage-pc" })).config,
        "gRPC back",
      );
      assert.equal((await admin.request("POST", "/api/v1/user-groups", { name: "after" })).status, 201);
      const after = await collectDatabaseFamilies(db, server.ctx.log);
      assert.deepEqual(after.find((f) => f.name === "svc_database_up")?.samples.map((x) => x.value), [1]);
      assert.ok(after.some((f) => f.name === "svc_nodes_total"), "the database families are back");
    } finally {
      agent.close();
    }
  } finally {
    await server.stop();
  }
}

Deno.test({
  name: "database outage: 503 with Retry-After on REST, UNAVAILABLE on gRPC [pglite]",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const info = await freshDb("pglite");
    try {
      await outageScenario(info.db, () => info.db.close());
    } finally {
      await info.dispose();
    }
  },
});

Deno.test({
  name: "database outage: 503 with Retry-After on REST, UNAVAILABLE on gRPC, recovery [postgres]",
  ignore: !TEST_DATABASE_URL,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const info = await freshDb("postgres");
    const target = new URL(TEST_DATABASE_URL);
    const relay = startRelay({ hostname: target.hostname, port: Number(target.port || 5432) });
    const name = new URL(info.url).pathname.slice(1);
    const viaRelay = new URL(info.url);
    viaRelay.hostname = "127.0.0.1";
    viaRelay.port = String(relay.port);
    const db = await openPostgres(viaRelay.toString(), { max: 4 });
    const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
    try {
      await outageScenario(
        db,
        async () => {
          // Connection refused for new connections, terminated ones for the pool…
          relay.down();
          // …and should anything get through, the database itself is gone.
          await admin.unsafe(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
          await admin.unsafe(
            `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}' AND pid <> pg_backend_pid()`,
          );
          await admin.unsafe(`ALTER DATABASE ${name} RENAME TO ${name}_away`);
          // The relay stays shut for the whole outage (every connection attempt refused, as with a stopped
          // PostgreSQL host): that is what made postgres.js wait longer before each new attempt.
        },
        async () => {
          await admin.unsafe(`ALTER DATABASE ${name}_away RENAME TO ${name}`);
          await admin.unsafe(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
          relay.up();
        },
      );
    } finally {
      await db.close();
      relay.down();
      await admin.unsafe(`ALTER DATABASE ${name}_away RENAME TO ${name}`).catch(() => {});
      await admin.end();
      await info.dispose();
    }
  },
});
