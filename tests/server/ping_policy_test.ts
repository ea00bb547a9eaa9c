/**
 * The policy port's ping policy follows gRPC's: a ping that comes after the server sent data is never a
 * strike, so clients that ping while they receive (gRPC's C core, Go and C++ probe flow control this way)
 * keep their stream through several ~1 MiB snapshots, while a client that pings an idle connection faster
 * than every 10 s is still sent GOAWAY "too_many_pings". Proven with a `node:http2` client that pings after
 * every DATA it receives (one ping outstanding at a time, as gRPC clients do), and with Debian's
 * python3-grpcio reading the stream with its default settings.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { dbTest } from "../helpers/db.ts";
import { type Agent, type AgentServer } from "../helpers/agents.ts";
import * as kit from "../helpers/agents.ts";
import { SubscribePolicyUpdatesRequestSchema } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import type { Db } from "../../server/db/db.ts";

/** Snapshots sent after the first one. */
const SNAPSHOTS = 4;
const MIB = 1 << 20;
const PYTHON = "/usr/bin/python3";

/** A group with a ~1 MiB policy, and an enrolled agent in it. */
async function setUp(db: Db, server: AgentServer): Promise<{ group: string; agent: Agent }> {
  const group = await kit.createGroup(db, "readers");
  const big = await kit.releasedPolicy(db, {
    name: "big",
    content: JSON.stringify({ setting: "x".repeat(MIB) }),
  });
  await kit.bind(db, big, group);
  return { group, agent: await kit.enrollAgent(server, { name: "reader-1", groupId: group }) };
}

/** Makes the hub send the group's nodes a new snapshot (with the large policy in it). */
async function anotherSnapshot(db: Db, group: string, i: number): Promise<void> {
  await kit.bind(db, await kit.releasedPolicy(db, { name: `small-${i}` }), group);
}

function subscribeRequest(agent: Agent): Uint8Array {
  return toBinary(
    SubscribePolicyUpdatesRequestSchema,
    create(SubscribePolicyUpdatesRequestSchema, {
      clientId: agent.name,
    }),
  );
}

/** `SubscribePolicyUpdates` over a bare HTTP/2 session, so the test decides when to ping. */
function rawStream(server: AgentServer, agent: Agent) {
  const session = http2.connect(`https://localhost:${server.policyPort}`, {
    ca: server.ctx.ca.certPem,
    key: agent.keyPem,
    cert: agent.certPem,
    ALPNProtocols: ["h2"],
  });
  const state = {
    bytes: 0,
    pings: 0,
    pingAfterData: true,
    goaway: "",
    ended: "",
  };
  session.on("goaway", (code: number, _last: number, data?: Uint8Array) => {
    state.goaway = `${code} ${new TextDecoder().decode(data ?? new Uint8Array())}`;
  });
  session.on("error", (err: Error) => state.ended ||= err.message);
  session.on("close", () => state.ended ||= "session closed");
  const message = subscribeRequest(agent);
  const frame = new Uint8Array(5 + message.length);
  new DataView(frame.buffer).setUint32(1, message.length);
  frame.set(message, 5);
  const call = session.request({
    ":method": "POST",
    ":path": "/svc.policy.v1.PolicyService/SubscribePolicyUpdates",
    "content-type": "application/grpc",
    te: "trailers",
  });
  call.end(frame);
  let outstanding = false;
  const ping = () => {
    if (outstanding || session.closed || session.destroyed) return;
    outstanding = true;
    state.pings++;
    session.ping(() => outstanding = false);
  };
  call.on("data", (chunk: Uint8Array) => {
    state.bytes += chunk.length;
    if (state.pingAfterData) ping();
  });
  call.on("error", (err: Error) => state.ended ||= err.message);
  call.on("close", () => state.ended ||= `stream closed (${call.rstCode})`);
  return {
    state,
    ping,
    close() {
      call.close();
      session.destroy();
    },
  };
}

dbTest("ping policy: pings after data are free; pings on an idle connection still end it", async (db) => {
  const server = await kit.startAgentServer(db);
  const { group, agent } = await setUp(db, server);
  const stream = rawStream(server, agent);
  try {
    const received = async (bytes: number, what: string) => {
      await kit.eventually(() => {
        assert.equal(stream.state.goaway, "", `${what}: GOAWAY after ${stream.state.pings} pings`);
        assert.equal(stream.state.ended, "", what);
        return Promise.resolve(stream.state.bytes >= bytes);
      }, { what, timeoutMs: 120_000 });
    };
    await received(MIB, "the first snapshot");
    for (let i = 1; i <= SNAPSHOTS; i++) {
      await anotherSnapshot(db, group, i);
      await received((i + 1) * MIB, `snapshot ${i + 1}`);
    }
    assert.ok(stream.state.pings > 10, `the client pinged ${stream.state.pings} times while it received`);

    // Without data in between, pings sooner than every 10 s are strikes: the third past the limit ends it.
    stream.state.pingAfterData = false;
    const timer = setInterval(stream.ping, 20);
    try {
      await kit.eventually(() => Promise.resolve(stream.state.goaway !== ""), {
        what: "GOAWAY for idle pings",
        timeoutMs: 30_000,
      });
    } finally {
      clearInterval(timer);
    }
    assert.match(
      stream.state.goaway,
      new RegExp(`^${http2.constants.NGHTTP2_ENHANCE_YOUR_CALM} too_many_pings`),
    );
  } finally {
    stream.close();
    agent.close();
    await server.stop();
  }
});

const grpcioMissing = await new Deno.Command(PYTHON, { args: ["-c", "import grpc"], stderr: "null" }).output()
  .then((out) => out.success ? "" : "python3-grpcio is not installed", () => `${PYTHON} is missing`);
if (grpcioMissing) console.warn(`ping policy with gRPC's C core skipped: ${grpcioMissing}`);

dbTest(
  "ping policy: Debian's python3-grpcio keeps its stream through several ~1 MiB snapshots",
  async (db) => {
    const server = await kit.startAgentServer(db);
    const { group, agent } = await setUp(db, server);
    const child = new Deno.Command(PYTHON, {
      args: [new URL("../helpers/python_policy_stream.py", import.meta.url).pathname],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    try {
      const writer = child.stdin.getWriter();
      await writer.write(new TextEncoder().encode(JSON.stringify({
        target: `localhost:${server.policyPort}`,
        ca_pem: server.ctx.ca.certPem,
        key_pem: agent.keyPem,
        cert_pem: agent.certPem,
        request: Array.from(subscribeRequest(agent), (b) => b.toString(16).padStart(2, "0")).join(""),
      })));
      await writer.close();
      let bytes = 0;
      let exited = "";
      const stderr = new Response(child.stderr).text();
      child.status.then(async (status) => exited = `exit ${status.code}: ${(await stderr).trim()}`);
      void (async () => {
        let buffered = "";
        for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
          buffered += chunk;
          const lines = buffered.split("\n");
          buffered = lines.pop()!;
          for (const line of lines) bytes += Number(line);
        }
      })();
      const received = async (wanted: number, what: string) => {
        await kit.eventually(() => {
          assert.equal(exited, "", `the Python client lost its stream before ${what}`);
          return Promise.resolve(bytes >= wanted);
        }, { what, timeoutMs: 120_000 });
      };
      await received(MIB, "the first snapshot");
      for (let i = 1; i <= SNAPSHOTS; i++) {
        await anotherSnapshot(db, group, i);
        await received((i + 1) * MIB, `snapshot ${i + 1}`);
      }
      assert.equal(exited, "");
      assert.equal(server.test.logs.filter((line) => /pings too often/.test(line)).length, 0);
    } finally {
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
      await child.status;
      agent.close();
      await server.stop();
    }
  },
  { ignore: grpcioMissing !== "" },
);
