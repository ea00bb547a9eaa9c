/**
 * The console's live-event stream (`GET /api/v1/events`) against real servers: a real agent enrolling,
 * connecting, reporting compliance and going away, and a real policy release each reach SSE clients reading
 * over the web port (HTTP/2 and HTTP/1.1); a user without node:view never gets node events; the stream ends
 * with its session (logout, a disabled user); a client that stops reading costs a bounded queue, gets one
 * `resync` and is eventually dropped; the stream limits answer 429; and, on PostgreSQL, an event produced
 * on one server instance reaches a stream on another instance sharing the database.
 */
import assert from "node:assert/strict";
import { dbTest, TEST_DATABASE_URL } from "../helpers/db.ts";
import { type AgentServer } from "../helpers/agents.ts";
import * as kit from "../helpers/agents.ts";
import type { TestClient } from "../helpers/app.ts";
import type { ConfigOverrides } from "../helpers/app.ts";
import { buildRoutes } from "../../server/http/routes/mod.ts";
import { releaseRevision, saveRevision } from "../../server/domain/policy_revisions.ts";
import { liveBroker, tuneLiveBroker } from "../../server/events/broker.ts";
import { publishLiveHint } from "../../server/events/publish.ts";
import { metricsRegistry } from "../../server/metrics/counters.ts";
import { openPostgres } from "../../server/db/mod.ts";
import { ComplianceStatus } from "../../shared/gen/svc/policy/v1/policy_pb.ts";

/** One server-sent event as the client parsed it. */
interface SseEvent {
  event: string;
  // deno-lint-ignore no-explicit-any
  data: any;
}

/** An SSE client reading a fetch body in the background. */
interface SseReader {
  status: number;
  contentType: string;
  events: SseEvent[];
  /** Raw text received so far (comments and `retry:` included). */
  text(): string;
  bytes(): number;
  /** Resolves with the first event (from the start) satisfying `predicate`. */
  waitFor(predicate: (e: SseEvent) => boolean, what: string, timeoutMs?: number): Promise<SseEvent>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  cancel(): Promise<void>;
}

function readSse(res: Response): SseReader {
  const events: SseEvent[] = [];
  let raw = "";
  let buffer = "";
  let bytes = 0;
  let finished = false;
  const waiters = new Set<() => void>();
  const wake = () => waiters.forEach((w) => w());
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const ended = (async () => {
    try {
      while (true) {
        const { done, value } = await reader.read();
        if (done) break;
        bytes += value.byteLength;
        const chunk = decoder.decode(value, { stream: true });
        raw += chunk;
        buffer += chunk;
        let cut: number;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let event = "message";
          let data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) event = line.slice(7);
            if (line.startsWith("data: ")) data += line.slice(6);
          }
          if (data) events.push({ event, data: JSON.parse(data) });
        }
        wake();
      }
    } catch {
      // A reset stream ends it too.
    } finally {
      finished = true;
      wake();
    }
  })();
  return {
    status: res.status,
    contentType: res.headers.get("content-type") ?? "",
    events,
    text: () => raw,
    bytes: () => bytes,
    async waitFor(predicate, what, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (true) {
        const found = events.find(predicate);
        if (found) return found;
        if (finished) {
          throw new Error(`stream ended while waiting for ${what}; got ${JSON.stringify(events)}`);
        }
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(events)}`);
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            waiters.delete(done);
            resolve();
          };
          const timer = setTimeout(done, left);
          waiters.add(done);
        });
      }
    },
    ended,
    async cancel() {
      await reader.cancel().catch(() => {});
      await ended;
    },
  };
}

/** Resolves with `promise`, or fails naming `what` after a generous deadline (never hangs the suite). */
async function within<T>(promise: Promise<T>, what: string, timeoutMs = 60_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Waits until a synchronous condition holds. */
function until(check: () => boolean, options: { what: string; timeoutMs?: number }): Promise<void> {
  return kit.eventually(() => Promise.resolve(check()), { timeoutMs: 60_000, ...options });
}

function cookieHeader(client: TestClient): string {
  return [...client.cookies].map(([n, c]) => `${n}=${c.value}`).join("; ");
}

/** Opens the stream through the real web port. */
async function openRemote(
  server: AgentServer,
  client: TestClient,
  http: Deno.HttpClient,
): Promise<SseReader> {
  const res = await fetch(`https://localhost:${server.webPort}/api/v1/events`, {
    client: http,
    headers: { cookie: cookieHeader(client), accept: "text/event-stream" },
  });
  return readSse(res);
}

/** Opens the stream in-process (the app itself, no socket buffers in between). */
async function openInProcess(server: AgentServer, client: TestClient): Promise<Response> {
  return await server.test.fetch(
    new Request("https://svc.test/api/v1/events", {
      headers: { cookie: cookieHeader(client), "x-svc-remote-addr": "127.0.0.1" },
    }),
  );
}

function withServer(
  db: Parameters<typeof kit.startAgentServer>[0],
  config: ConfigOverrides,
  fn: (server: AgentServer) => Promise<void>,
): Promise<void> {
  return kit.withAgentServer(db, fn, { routes: (ctx, identity) => buildRoutes(ctx, identity), config });
}

const http2 = (server: AgentServer) =>
  Deno.createHttpClient({ caCerts: [server.ctx.ca.certPem], http2: true, http1: false });
const http1 = (server: AgentServer) =>
  Deno.createHttpClient({ caCerts: [server.ctx.ca.certPem], http2: false, http1: true });

const isFor = (topic: string, id?: string) => (e: SseEvent) =>
  e.event === topic && (id === undefined || e.data.ids === undefined || e.data.ids.includes(id));

dbTest("agent, compliance and policy changes reach console streams over HTTP/2 and HTTP/1.1", async (db) => {
  await withServer(db, {}, async (server) => {
    const clients = [http2(server), http1(server)];
    const streams: SseReader[] = [];
    let agent: Awaited<ReturnType<typeof kit.enrollAgent>> | undefined;
    try {
      const admin = await server.test.loginAs({ superAdmin: true });
      for (const c of clients) streams.push(await openRemote(server, admin, c));
      for (const s of streams) {
        assert.equal(s.status, 200);
        assert.match(s.contentType, /^text\/event-stream/);
      }
      await until(() => streams.every((s) => s.text().startsWith("retry: ")), {
        what: "the retry field before any event",
      });
      const group = await kit.createGroup(db, "lab");

      // Enrollment, then the node going online when its policy stream completes its initial sync.
      agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
      const nodeId = agent.nodeId;
      for (const s of streams) {
        const e = await s.waitFor(isFor("nodes", nodeId), "the enrollment's nodes event");
        assert.deepEqual(e.data, { topic: "nodes", ids: [nodeId] }, "a hint, not data");
      }
      const seenBefore = streams.map((s) => s.events.length);
      const watcher = kit.subscribe(agent.policy, { clientId: "pc-1" });
      await watcher.nextSnapshot();
      for (const [i, s] of streams.entries()) {
        await s.waitFor((e) => s.events.indexOf(e) >= seenBefore[i] && isFor("nodes", nodeId)(e), "online");
      }

      // A policy release reaching the group (a revision of a bound policy): one `policies` hint with the
      // hub's revision.
      const policyId = await kit.releasedPolicy(db, { name: "screen-lock" });
      await kit.bind(db, policyId, group);
      await watcher.nextSnapshot();
      const [{ revision: before }] = await db.query<{ revision: number }>(
        "SELECT revision FROM hub_state WHERE id",
      );
      await db.transaction(async (tx) => {
        await saveRevision(tx, policyId, { content: JSON.stringify({ setting: "v2" }), createdBy: "t" });
        await releaseRevision(tx, policyId);
      });
      for (const s of streams) {
        const e = await s.waitFor(
          (e) => e.event === "policies" && e.data.revision > before,
          "the release's policies event",
        );
        assert.deepEqual(e.data.ids, [group]);
      }
      await watcher.nextSnapshot();

      // A compliance report from the agent, over its real mTLS policy port.
      await agent.policy.reportCompliance({
        clientId: "pc-1",
        policyId,
        status: ComplianceStatus.COMPLIANT,
        policyVersion: 1,
        items: [],
      });
      for (const s of streams) {
        const e = await s.waitFor(isFor("compliance", nodeId), "the compliance event");
        assert.deepEqual(e.data, { topic: "compliance", ids: [nodeId] });
      }

      // The agent goes away: the node goes offline.
      const seenOnline = streams.map((s) => s.events.length);
      watcher.cancel();
      for (const [i, s] of streams.entries()) {
        await s.waitFor((e) => s.events.indexOf(e) >= seenOnline[i] && isFor("nodes", nodeId)(e), "offline");
      }
      assert.equal(
        (await db.query<{ status: string }>("SELECT status FROM nodes WHERE id = $1", [nodeId]))[0].status,
        "offline",
      );
    } finally {
      agent?.close();
      for (const s of streams) await s.cancel();
      for (const c of clients) c.close();
    }
  });
});

dbTest("a user without node:view gets compliance events but never node events", async (db) => {
  await withServer(db, {}, async (server) => {
    const http = http2(server);
    const streams: SseReader[] = [];
    let agent: Awaited<ReturnType<typeof kit.enrollAgent>> | undefined;
    try {
      const viewer = await server.test.loginAs({ permissions: ["compliance:view", "policy:view"] });
      const admin = await server.test.loginAs({ superAdmin: true });
      const restricted = await openRemote(server, viewer, http);
      const full = await openRemote(server, admin, http);
      streams.push(restricted, full);
      const group = await kit.createGroup(db, "lab");
      const policyId = await kit.releasedPolicy(db, { name: "p" });
      await kit.bind(db, policyId, group);
      agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
      const watcher = kit.subscribe(agent.policy, { clientId: "pc-1" });
      await watcher.nextSnapshot();
      await full.waitFor(isFor("nodes", agent.nodeId), "the admin's node event");
      // The node events were published before this report; a stream that could see them would have them first.
      const adminSeen = full.events.length;
      await agent.policy.reportCompliance({
        clientId: "pc-1",
        policyId,
        status: ComplianceStatus.ERROR,
        policyVersion: 1,
        items: [],
      });
      await restricted.waitFor(isFor("compliance", agent.nodeId), "the viewer's compliance event");
      await full.waitFor(isFor("compliance", agent.nodeId), "the admin's compliance event");
      // The error made the node degraded: a node event published before the compliance one.
      await full.waitFor((e) => e.event === "nodes" && full.events.indexOf(e) >= adminSeen, "degraded");
      await restricted.waitFor((e) => e.event === "policies", "the viewer's policies event (policy:view)");
      assert.deepEqual(
        restricted.events.filter((e) => e.event === "nodes"),
        [],
        "no node event without node:view",
      );
      watcher.cancel();
    } finally {
      agent?.close();
      for (const s of streams) await s.cancel();
      http.close();
    }
  });
});

dbTest("the stream ends when its session ends: logout, a disabled user, a revoked API token", async (db) => {
  await withServer(db, { events: { heartbeatSeconds: 1 } }, async (server) => {
    const http = http1(server);
    try {
      const admin = await server.test.loginAs({ superAdmin: true });
      const alice = await server.test.loginAs({ permissions: ["node:view"] });
      const bob = await server.test.loginAs({ permissions: ["node:view"] });
      const aliceStream = await openRemote(server, alice, http);
      const bobStream = await openRemote(server, bob, http);
      const adminStream = await openRemote(server, admin, http);
      assert.equal(aliceStream.status, 200);
      await until(() => liveBroker(server.ctx).stats().streams === 3, { what: "three streams" });

      assert.equal((await alice.request("POST", "/api/v1/auth/logout")).status, 204);
      await within(aliceStream.ended, "alice's stream to end after logout");
      const disabled = await admin.request("PUT", `/api/v1/users/${bob.user.id}`, { enabled: false });
      assert.equal(disabled.status, 200, disabled.text);
      await within(bobStream.ended, "bob's stream to end after he was disabled");
      await until(() => liveBroker(server.ctx).stats().streams === 1, {
        what: "only the admin's stream left",
      });

      // The admin's stream lives on and still carries events.
      await publishLiveHint(db, { topic: "nodes", ids: ["00000000-0000-4000-8000-000000000001"] });
      await adminStream.waitFor(isFor("nodes"), "an event on the surviving stream");
      await until(() => /: heartbeat\n\n/.test(adminStream.text()), {
        what: "heartbeat comments while idle",
      });

      // An ended session cannot open a new stream.
      const again = await openRemote(server, alice, http);
      assert.equal(again.status, 401);
      await again.cancel();

      // A script's stream with an API token ends when the token is revoked.
      const carol = await server.test.loginAs({ permissions: ["node:view"] });
      const made = await carol.request("POST", "/api/v1/api-tokens", {
        name: "watcher",
        expires_in_days: 1,
        password: carol.password,
      });
      assert.equal(made.status, 201, made.text);
      const tokenRes = await fetch(`https://localhost:${server.webPort}/api/v1/events`, {
        client: http,
        headers: { authorization: `Bearer ${made.json.token}` },
      });
      const tokenStream = readSse(tokenRes);
      assert.equal(tokenStream.status, 200);
      await publishLiveHint(db, { topic: "nodes" });
      await tokenStream.waitFor(isFor("nodes"), "an event on the token's stream");
      const revoked = await carol.request("DELETE", `/api/v1/api-tokens/${made.json.api_token.id}`);
      assert.equal(revoked.status, 200, revoked.text);
      await within(tokenStream.ended, "the token's stream to end after revocation");
      await adminStream.cancel();
    } finally {
      http.close();
    }
  });
});

dbTest(
  "a client that stops reading costs a bounded queue and gets one resync when it reads again",
  async (db) => {
    // Heartbeats far apart: this client must not be dropped as stuck while the test fills its queue.
    await withServer(db, { events: { heartbeatSeconds: 300 } }, async (server) => {
      const queueBytes = 4096;
      tuneLiveBroker(server.ctx, { queueBytes, coalesceMs: 5 });
      const admin = await server.test.loginAs({ superAdmin: true });
      const res = await openInProcess(server, admin);
      assert.equal(res.status, 200);
      const broker = liveBroker(server.ctx);
      const manyIds = () => Array.from({ length: 100 }, () => crypto.randomUUID());

      // Nobody reads: hints keep coming until the stream reports its client lagging.
      let published = 0;
      // PGlite answers without yielding to timers: give the stream's flush timer its turn.
      const tick = () => new Promise((r) => setTimeout(r, 1));
      while (broker.stats().lagging === 0) {
        await tick();
        await publishLiveHint(db, { topic: "nodes", ids: manyIds() });
        await publishLiveHint(db, { topic: "compliance", ids: manyIds() });
        published += 2;
        assert.ok(published < 10_000, "the stream never noticed its client was not reading");
      }
      // Many more hints while lagging: none of them is queued.
      for (let i = 0; i < 300; i++) {
        await publishLiveHint(db, { topic: "nodes", ids: manyIds() });
        if (i % 10 === 0) await tick();
      }
      published += 300;

      const stream = readSse(res);
      const resync = await stream.waitFor((e) => e.event === "resync", "the resync hint");
      const before = stream.events.indexOf(resync);
      const bytesBeforeResync = new TextEncoder().encode(
        stream.text().slice(0, stream.text().indexOf("event: resync")),
      ).byteLength;
      // The queue holds at most its high-water mark plus the one write that crossed it (≤ 2 topics × 100 ids).
      assert.ok(
        bytesBeforeResync <= queueBytes + 2 * 100 * 40 + 200,
        `${bytesBeforeResync} bytes were queued for a client that did not read (${published} hints published)`,
      );
      assert.ok(before < published / 4, `${before} events queued before the resync`);

      // Reading again: hints flow as before.
      await publishLiveHint(db, { topic: "policies", revision: 42 });
      await stream.waitFor(
        (e) => e.event === "policies" && e.data.revision === 42,
        "a hint after the resync",
      );

      await stream.cancel();
    });
  },
);

dbTest("a client that never reads is dropped once it has been stuck for two heartbeats", async (db) => {
  await withServer(db, { events: { heartbeatSeconds: 1 } }, async (server) => {
    tuneLiveBroker(server.ctx, { queueBytes: 4096, coalesceMs: 5 });
    const admin = await server.test.loginAs({ superAdmin: true });
    const broker = liveBroker(server.ctx);
    const stuck = await openInProcess(server, admin);
    assert.equal(stuck.status, 200);
    const reading = readSse(await openInProcess(server, admin));
    assert.equal(broker.stats().streams, 2);
    await kit.eventually(async () => {
      await publishLiveHint(db, {
        topic: "nodes",
        ids: Array.from({ length: 100 }, () => crypto.randomUUID()),
      });
      return broker.stats().streams === 1;
    }, { what: "the stuck stream dropped", timeoutMs: 60_000 });
    // Errored, not closed: the web port resets the connection instead of waiting for the queue to drain.
    await assert.rejects(stuck.body!.getReader().read(), "the dropped stream fails");
    await reading.waitFor(isFor("nodes"), "the reading client keeps its stream");
    await reading.cancel();
  });
});

function gauge(): number {
  const metric = metricsRegistry.getSingleMetric("svc_live_event_streams_open") as unknown as {
    hashMap: Record<string, { value: number }>;
  };
  return Object.values(metric.hashMap).reduce((sum, v) => sum + v.value, 0);
}

dbTest("stream limits per user and in total answer 429; the gauge counts open streams", async (db) => {
  await withServer(db, { events: { maxStreamsPerUser: 2, maxStreams: 3 } }, async (server) => {
    const alice = await server.test.loginAs({ permissions: [] });
    const bob = await server.test.loginAs({ permissions: [] });
    const open: Response[] = [];
    const start = gauge();
    try {
      for (let i = 0; i < 2; i++) open.push(await openInProcess(server, alice));
      assert.deepEqual(open.map((r) => r.status), [200, 200]);
      assert.equal(gauge() - start, 2);
      const third = await openInProcess(server, alice);
      assert.equal(third.status, 429);
      const body = await third.json();
      assert.equal(body.error.code, "too_many_streams");
      assert.match(body.error.message, /events\.max_streams_per_user/);
      open.push(await openInProcess(server, bob));
      assert.equal(open[2].status, 200);
      const overTotal = await openInProcess(server, bob);
      assert.equal(overTotal.status, 429);
      assert.match((await overTotal.json()).error.message, /events\.max_streams\b/);
      assert.equal(gauge() - start, 3);
      await open.pop()!.body!.cancel();
      await until(() => gauge() - start === 2, { what: "the gauge going down on close" });
      const reopened = await openInProcess(server, bob);
      assert.equal(reopened.status, 200, "a closed stream frees its place");
      open.push(reopened);
    } finally {
      for (const r of open) await r.body?.cancel().catch(() => {});
    }
    await until(() => gauge() === start, { what: "every stream closed" });
  });
});

Deno.test({
  name: "an event produced on one server instance reaches a stream on another sharing PostgreSQL",
  ignore: !TEST_DATABASE_URL,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const { freshDb } = await import("../helpers/db.ts");
    const info = await freshDb("postgres");
    const otherDb = await openPostgres(info.url, { max: 3 });
    const routes = { routes: buildRoutes };
    const a = await kit.startAgentServer(info.db, routes);
    const b = await kit.startAgentServer(otherDb, routes);
    const http = http2(b);
    let agent: Awaited<ReturnType<typeof kit.enrollAgent>> | undefined;
    let stream: SseReader | undefined;
    try {
      const admin = await b.test.loginAs({ superAdmin: true });
      stream = await openRemote(b, admin, http);
      assert.equal(stream.status, 200);
      const group = await kit.createGroup(info.db, "lab");
      const policyId = await kit.releasedPolicy(info.db, { name: "p" });
      await kit.bind(info.db, policyId, group);
      await stream.waitFor((e) => e.event === "policies", "a binding made through instance A");
      // The agent enrolls, streams and reports through instance A only.
      agent = await kit.enrollAgent(a, { name: "pc-1", groupId: group });
      const watcher = kit.subscribe(agent.policy, { clientId: "pc-1" });
      await watcher.nextSnapshot();
      await agent.policy.reportCompliance({
        clientId: "pc-1",
        policyId,
        status: ComplianceStatus.COMPLIANT,
        policyVersion: 1,
        items: [],
      });
      await stream.waitFor(isFor("nodes", agent.nodeId), "A's node event on B");
      await stream.waitFor(isFor("compliance", agent.nodeId), "A's compliance event on B");
      watcher.cancel();
    } finally {
      agent?.close();
      await stream?.cancel();
      http.close();
      await b.stop();
      await a.stop();
      await otherDb.close();
      await info.dispose();
    }
  },
});

Deno.test({
  name: "when the database drops the listening connection, open streams hear that anything may have changed",
  ignore: !TEST_DATABASE_URL,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const { freshDb } = await import("../helpers/db.ts");
    const info = await freshDb("postgres");
    const server = await kit.startAgentServer(info.db, { routes: buildRoutes });
    const http = http2(server);
    const killer = await openPostgres(info.url, { max: 1 });
    let stream: SseReader | undefined;
    try {
      const admin = await server.test.loginAs({ superAdmin: true });
      stream = await openRemote(server, admin, http);
      assert.equal(stream.status, 200);
      // Hints published while the LISTEN connection is gone are never delivered, so the broker must say
      // "anything may have changed" (a hint per topic without ids) once it listens again.
      const listeners = async () =>
        await killer.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'listen%'",
        );
      await kit.eventually(async () => (await listeners()).length > 0, { what: "a LISTEN connection" });
      for (const { pid } of await listeners()) {
        await killer.query("SELECT pg_terminate_backend($1)", [pid]);
      }
      for (const topic of ["nodes", "compliance", "policies"]) {
        await stream.waitFor(
          (e) => e.event === topic && e.data.ids === undefined,
          `an "any ${topic}" hint after the listening connection came back`,
          60_000,
        );
      }
    } finally {
      await stream?.cancel();
      http.close();
      await server.stop();
      await killer.close();
      await info.dispose();
    }
  },
});
