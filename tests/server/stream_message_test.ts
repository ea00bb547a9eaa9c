/**
 * The hub writes a stream message in one buffer (server/hub/stream_message.ts), with the policy's content and
 * typed content as ready bytes (server/hub/typed_content.ts): every reader, the server's schema and the
 * agent's, decodes it exactly as the message protobuf-es would have written with the members set normally.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import * as server from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import * as agent from "../../agent/gen/svc/policy/v1/policy_pb.ts";
import { encodeMembers, withEncodedMembers } from "../../server/hub/typed_content.ts";
import { encodePolicyUpdate } from "../../server/hub/stream_message.ts";
import { getPolicyType } from "../../shared/policy_types/mod.ts";
import type { FirefoxPolicy } from "../../shared/gen/svc/policy/v1/firefox_pb.ts";

function policyInit(name: string) {
  return {
    id: "0d4c1f3e-5b6a-4c7d-8e9f-0a1b2c3d4e5f",
    name,
    description: "d",
    type: "Firefox",
    version: 3,
    state: server.PolicyState.RELEASED,
    priority: 250,
  };
}

/** The message as protobuf-es writes it with content and typed content set as fields. */
function reference(content: string, name: string, revision: bigint, complete: boolean): Uint8Array {
  return toBinary(
    server.PolicyUpdateSchema,
    create(server.PolicyUpdateSchema, {
      type: server.EventType.SNAPSHOT,
      policy: {
        ...policyInit(name),
        content,
        typedContent: {
          case: "firefoxPolicy",
          value: getPolicyType("Firefox")!.parse(content, { ignoreUnknownFields: true }) as FirefoxPolicy,
        },
      },
      snapshotComplete: complete,
      revision,
    }),
  );
}

function encoded(content: string, name: string, revision: bigint, complete: boolean): Uint8Array {
  const policy = withEncodedMembers(
    create(server.PolicySchema, policyInit(name)),
    encodeMembers("Firefox", content),
  );
  return encodePolicyUpdate(
    create(server.PolicyUpdateSchema, {
      type: server.EventType.SNAPSHOT,
      policy,
      snapshotComplete: complete,
      revision,
    }),
  );
}

Deno.test("stream message: decodes as the message with its members set, for the server's and the agent's schema", () => {
  fc.assert(
    fc.property(
      fc.dictionary(
        fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 12 }),
        fc.string({ unit: "grapheme", maxLength: 40 }),
      ),
      fc.string({ unit: "binary", maxLength: 30 }),
      fc.bigInt({ min: 0n, max: 1n << 62n }),
      fc.boolean(),
      (prefs, name, revision, complete) => {
        const content = JSON.stringify({
          Preferences: Object.fromEntries(
            Object.entries(prefs).map(([k, v]) => [k, { Value: v, Status: "locked" }]),
          ),
        });
        const mine = encoded(content, name, revision, complete);
        const theirs = reference(content, name, revision, complete);
        assert.deepEqual(
          fromBinary(server.PolicyUpdateSchema, mine),
          fromBinary(server.PolicyUpdateSchema, theirs),
        );
        assert.deepEqual(
          fromBinary(agent.PolicyUpdateSchema, mine),
          fromBinary(agent.PolicyUpdateSchema, theirs),
        );
        assert.equal(mine.length, theirs.length);
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("stream message: a 1 MiB policy and lengths that need multi-byte prefixes", () => {
  for (const size of [0, 100, 127, 128, 16_383, 16_384, 500_000]) {
    // Strings are at most 64 Ki characters each: large content is many preferences.
    const chunk = 50_000;
    const preferences = Object.fromEntries(
      Array.from({ length: Math.ceil(size / chunk) }, (_, i) => [
        `p${i}`,
        { Value: "é".repeat(Math.min(chunk, size - i * chunk)), Status: "locked" },
      ]),
    );
    const content = JSON.stringify({ Preferences: preferences });
    const mine = fromBinary(agent.PolicyUpdateSchema, encoded(content, "big", 7n, true));
    assert.equal(mine.policy?.content, content, `content of ${size}`);
    assert.deepEqual(mine, fromBinary(agent.PolicyUpdateSchema, reference(content, "big", 7n, true)));
  }
});

Deno.test("stream message: without members it is protobuf-es's own encoding", () => {
  const update = create(server.PolicyUpdateSchema, {
    type: server.EventType.DELETED,
    policy: { id: "x", type: "Firefox" },
    revision: 9n,
  });
  assert.deepEqual(encodePolicyUpdate(update), toBinary(server.PolicyUpdateSchema, update));
});
