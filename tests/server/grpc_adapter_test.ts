// The typed grpc-js adapter against a real grpc-js server and client over
// loopback, using the real PolicyService definition. Insecure credentials:
// TLS is covered by the policy-port tests.

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  createClient,
  createServiceDefinition,
  createServiceImplementation,
  GrpcError,
  type ServiceClient,
  type ServiceHandlers,
} from "../../shared/grpc/adapter.ts";
import {
  ComplianceStatus,
  EventType,
  type HeartbeatRequest,
  PolicyService,
  PolicyUpdateSchema,
} from "../../shared/gen/svc/policy/v1/policy_pb.ts";

type PolicyHandlers = ServiceHandlers<typeof PolicyService>;

/** Handlers that refuse every call; tests override what they exercise. */
function unimplementedHandlers(): PolicyHandlers {
  const refuse = () =>
    Promise.reject(new GrpcError(grpc.status.UNIMPLEMENTED, "not implemented in this test"));
  const handlers: Record<string, unknown> = {};
  for (const method of PolicyService.methods) handlers[method.localName] = refuse;
  return handlers as PolicyHandlers;
}

interface Harness {
  client: ServiceClient<typeof PolicyService>;
  unexpected: { error: unknown; path: string }[];
  close(): Promise<void>;
}

async function startPolicyService(
  overrides: Partial<PolicyHandlers>,
): Promise<Harness> {
  const unexpected: { error: unknown; path: string }[] = [];
  const server = new grpc.Server();
  server.addService(
    createServiceDefinition(PolicyService),
    createServiceImplementation(PolicyService, { ...unimplementedHandlers(), ...overrides }, {
      onUnexpectedError: (error, path) => unexpected.push({ error, path }),
    }),
  );
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) => {
      if (error) reject(error);
      else resolve(bound);
    });
  });
  const client = createClient(PolicyService, `127.0.0.1:${port}`, {
    credentials: grpc.credentials.createInsecure(),
  });
  return {
    client,
    unexpected,
    async close() {
      client.close();
      const shutdown = new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      // A call a broken test left open would stall the graceful shutdown forever.
      await within(shutdown, 2_000, "graceful server shutdown").catch(() => server.forceShutdown());
    },
  };
}

/** Fails instead of hanging when `promise` does not settle in time. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("unary call round-trips request, metadata and response", async () => {
  let received: HeartbeatRequest | undefined;
  let receivedHeader: grpc.MetadataValue[] = [];
  const harness = await startPolicyService({
    heartbeat: (request, call) => {
      received = request;
      receivedHeader = call.metadata.get("x-request-id");
      return {};
    },
    // Handlers may answer synchronously (above) or with a promise (below).
    getAgentConfig: (request) =>
      Promise.resolve({
        config: {
          notifications: {
            enabled: true,
            cooldownSeconds: 300,
            defaultMessage: `settings changed on ${request.clientId}`,
            messageByPolicyType: { Firefox: "restart Firefox" },
          },
        },
      }),
  });
  try {
    const metadata = new grpc.Metadata();
    metadata.set("x-request-id", "req-1");
    await harness.client.heartbeat({
      clientId: "node-1",
      fqdn: "node-1.example.com",
      desktopEnvironments: ["GNOME 47"],
      healthy: false,
      healthMessage: "dconf update failed",
    }, { metadata, deadline: Date.now() + 5_000 });
    assert.equal(received?.clientId, "node-1");
    assert.deepEqual(received?.desktopEnvironments, ["GNOME 47"]);
    assert.equal(received?.healthy, false, "an explicit false must survive the wire");
    assert.equal(received?.healthMessage, "dconf update failed");
    assert.deepEqual(receivedHeader, ["req-1"]);

    const response = await harness.client.getAgentConfig({ clientId: "node-1" });
    assert.equal(response.$typeName, "svc.policy.v1.GetAgentConfigResponse");
    assert.equal(response.config?.notifications?.cooldownSeconds, 300);
    assert.equal(response.config?.notifications?.defaultMessage, "settings changed on node-1");
    assert.deepEqual(response.config?.notifications?.messageByPolicyType, { Firefox: "restart Firefox" });
    assert.deepEqual(harness.unexpected, []);
  } finally {
    await harness.close();
  }
});

Deno.test("server stream delivers every message in order, then ends", async () => {
  const harness = await startPolicyService({
    subscribePolicyUpdates: (request, call) => {
      call.write({
        type: EventType.SNAPSHOT,
        revision: 7n,
        policy: {
          id: "p-1",
          type: "Dconf",
          typedContent: {
            case: "dconfPolicy",
            value: {
              entries: [{ schemaId: "org.gnome.desktop.screensaver", key: "lock-enabled", value: "true" }],
            },
          },
        },
      });
      // An already encoded message passes through untouched.
      call.write(toBinary(
        PolicyUpdateSchema,
        create(PolicyUpdateSchema, {
          type: EventType.SNAPSHOT,
          revision: 7n,
          policy: { id: "p-2", type: "Polkit" },
        }),
      ));
      call.write({ type: EventType.SNAPSHOT, revision: 7n, snapshotComplete: true });
      assert.equal(request.lastKnownRevision, 3n);
    },
  });
  try {
    const updates = [];
    for await (
      const update of harness.client.subscribePolicyUpdates({ clientId: "node-1", lastKnownRevision: 3n })
    ) {
      updates.push(update);
    }
    assert.equal(updates.length, 3);
    assert.deepEqual(updates.map((u) => u.policy?.id), ["p-1", "p-2", undefined]);
    assert.deepEqual(updates.map((u) => u.snapshotComplete), [false, false, true]);
    assert.ok(updates.every((u) => u.type === EventType.SNAPSHOT && u.revision === 7n));
    const typed = updates[0].policy?.typedContent;
    assert.equal(typed?.case, "dconfPolicy");
    assert.equal(typed?.case === "dconfPolicy" && typed.value.entries[0].key, "lock-enabled");
    assert.deepEqual(harness.unexpected, []);
  } finally {
    await harness.close();
  }
});

Deno.test("a GrpcError reaches the client with its code and message", async () => {
  const harness = await startPolicyService({
    reportCompliance: (request) =>
      Promise.reject(new GrpcError(grpc.status.NOT_FOUND, `policy "${request.policyId}" does not exist`)),
    subscribePolicyUpdates: (_request, call) => {
      call.write({ type: EventType.SNAPSHOT, snapshotComplete: true });
      throw new GrpcError(grpc.status.PERMISSION_DENIED, "client_id does not match the certificate");
    },
  });
  try {
    await assert.rejects(
      harness.client.reportCompliance({
        clientId: "node-1",
        policyId: "p-9",
        status: ComplianceStatus.COMPLIANT,
      }),
      (error: unknown) => {
        assert.ok(error instanceof GrpcError);
        assert.equal(error.code, grpc.status.NOT_FOUND);
        assert.equal(error.message, 'policy "p-9" does not exist');
        return true;
      },
    );

    const received = [];
    await assert.rejects(
      (async () => {
        for await (const update of harness.client.subscribePolicyUpdates({ clientId: "other" })) {
          received.push(update);
        }
      })(),
      (error: unknown) => {
        assert.ok(error instanceof GrpcError);
        assert.equal(error.code, grpc.status.PERMISSION_DENIED);
        assert.equal(error.message, "client_id does not match the certificate");
        return true;
      },
    );
    assert.equal(received.length, 1, "messages written before the error are delivered");
    assert.deepEqual(harness.unexpected, [], "intended errors are not logged as unexpected");
  } finally {
    await harness.close();
  }
});

Deno.test("an unexpected throw arrives as INTERNAL without its details", async () => {
  const secret = "connection to postgres://admin:hunter2@db failed";
  const harness = await startPolicyService({
    // A synchronous throw, not a rejection: the adapter must catch both.
    renewCertificate: () => {
      throw new Error(secret);
    },
    subscribePolicyUpdates: () => Promise.reject(new TypeError(secret)),
  });
  try {
    for (
      const call of [
        () =>
          harness.client.renewCertificate({
            clientId: "node-1",
            csrPem: "-----BEGIN CERTIFICATE REQUEST-----",
          }),
        async () => {
          for await (const _ of harness.client.subscribePolicyUpdates({ clientId: "node-1" })) {
            // no messages expected
          }
        },
      ]
    ) {
      await assert.rejects(call(), (error: unknown) => {
        assert.ok(error instanceof GrpcError);
        assert.equal(error.code, grpc.status.INTERNAL);
        assert.equal(error.message, "internal error");
        assert.ok(!String(error.cause).includes("hunter2"), "the original message must not reach the client");
        return true;
      });
    }
    assert.deepEqual(harness.unexpected.map((u) => [u.path, (u.error as Error).message]), [
      ["/svc.policy.v1.PolicyService/RenewCertificate", secret],
      ["/svc.policy.v1.PolicyService/SubscribePolicyUpdates", secret],
    ]);
  } finally {
    await harness.close();
  }
});

Deno.test("leaving a stream early or aborting it cancels the call on the server", async () => {
  let cancellations = 0;
  const bothCancelled = Promise.withResolvers<void>();
  const harness = await startPolicyService({
    // Watch mode: the stream stays open until the client goes away.
    subscribePolicyUpdates: (_request, call) => {
      call.write({ type: EventType.SNAPSHOT, snapshotComplete: true });
      return new Promise<void>((done) => {
        call.on("cancelled", () => {
          if (++cancellations === 2) bothCancelled.resolve();
          done();
        });
      });
    },
  });
  try {
    for await (const update of harness.client.subscribePolicyUpdates({ clientId: "node-1" })) {
      assert.equal(update.snapshotComplete, true);
      break;
    }

    const abort = new AbortController();
    await assert.rejects(
      (async () => {
        const updates = harness.client.subscribePolicyUpdates({ clientId: "node-1" }, {
          signal: abort.signal,
        });
        for await (const _ of updates) abort.abort();
      })(),
      (error: unknown) => error instanceof GrpcError && error.code === grpc.status.CANCELLED,
    );

    await within(bothCancelled.promise, 5_000, "the server to see both cancellations");
    assert.deepEqual(harness.unexpected, []);
  } finally {
    await harness.close();
  }
});
