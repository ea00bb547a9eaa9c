/**
 * The web port carries the enrollment gRPC service to anyone, so its HTTP/2 sessions get the policy port's
 * limits: 256 concurrent streams advertised in SETTINGS, client pings no more often than every 10 s on an idle
 * connection (GOAWAY "too_many_pings" past the strikes), and the server's own keepalive pings, with the
 * connection closed when they go unanswered... the last with a shortened interval, as the test cannot wait an
 * hour. Enrollment keeps working on a connection that pings after every answer.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { dbTest } from "../helpers/db.ts";
import { createTestServer } from "../helpers/app.ts";
import { eventually } from "../helpers/agents.ts";
import { startWebPort } from "../../server/web_port.ts";
import { createEnrollmentHandlers } from "../../server/grpc/enrollment_service.ts";
import { GRPC_LIMITS } from "../../server/grpc/policy_server.ts";

dbTest("web port: the policy port's stream, ping and keepalive limits", async (db) => {
  const test = await createTestServer({
    db,
    config: { server: { address: "127.0.0.1", enrollmentPort: 0, policyPort: 0 } },
  });
  const web = await startWebPort(test.ctx, {
    fetch: test.fetch,
    enrollment: createEnrollmentHandlers(test.ctx),
    keepalive: { timeMs: 200, timeoutMs: 10_000 },
  });
  const session = http2.connect(`https://localhost:${web.port}`, { ca: test.ctx.ca.certPem });
  try {
    const state = { serverPings: 0, goaway: "" };
    session.on("ping", () => state.serverPings++);
    session.on("goaway", (code: number, _last: number, data?: Uint8Array) => {
      state.goaway = `${code} ${new TextDecoder().decode(data ?? new Uint8Array())}`;
    });
    session.on("error", () => {});
    await new Promise<void>((resolve) => session.once("remoteSettings", () => resolve()));
    assert.equal(session.remoteSettings.maxConcurrentStreams, GRPC_LIMITS.maxConcurrentStreams);

    // The server pings (here every 200 ms); the client's runtime answers, so the connection stays.
    await eventually(() => Promise.resolve(state.serverPings >= 3), {
      what: "keepalive pings from the server",
    });
    assert.equal(state.goaway, "");

    // A ping after each answer is never a strike: requests go on.
    for (let i = 0; i < 6; i++) {
      const res = await new Promise<number>((resolve, reject) => {
        const req = session.request({ ":path": "/api/v1/auth/me" });
        req.on("response", (headers) => resolve(Number(headers[":status"])));
        req.on("error", reject);
        req.resume();
        req.end();
      });
      assert.ok(res > 0 && res < 500, `answer ${res}`);
      await new Promise<void>((resolve) => session.ping(() => resolve()));
    }
    assert.equal(state.goaway, "", "pings after answers are free");

    // Pings on an idle connection sooner than every 10 s: GOAWAY ENHANCE_YOUR_CALM "too_many_pings".
    // After the GOAWAY the session may be destroyed between two ticks; a ping then throws, which is the
    // expected end of this loop, not a failure.
    const timer = setInterval(() => {
      if (session.destroyed || session.closed) return clearInterval(timer);
      try {
        session.ping(() => {});
      } catch {
        clearInterval(timer);
      }
    }, 20);
    try {
      await eventually(() => Promise.resolve(state.goaway !== ""), { what: "GOAWAY", timeoutMs: 30_000 });
    } finally {
      clearInterval(timer);
    }
    assert.match(state.goaway, new RegExp(`^${http2.constants.NGHTTP2_ENHANCE_YOUR_CALM} too_many_pings`));
    assert.ok(test.logs.some((line) => /web port: client pings too often/.test(line)));
  } finally {
    session.destroy();
    await web.stop();
    await test.close();
  }
});
