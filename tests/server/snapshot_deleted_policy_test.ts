/**
 * A policy deleted after a snapshot read its row and before its large content was read is left out of the
 * snapshot (its deletion is announced by its own notice), instead of failing the whole snapshot until the
 * next tick rebuilds it.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createLogger } from "../../server/core/log.ts";
import { type DeliveredPolicy, toPolicyMessages } from "../../server/hub/snapshot.ts";
import { typedContentCacheStats } from "../../server/hub/typed_content_cache.ts";

function delivered(id: string, content: string | null): DeliveredPolicy {
  return {
    id,
    name: `policy-${id.slice(0, 8)}`,
    description: "",
    type: "Firefox",
    content,
    content_sha256: "00".repeat(32),
    version: 1,
    deprecated: false,
    deprecation_message: "",
    replacement_policy_id: null,
    priority: 1,
  };
}

dbTest("a policy deleted while its snapshot is built is left out, the others delivered", async (db) => {
  const log = createLogger("error");
  const kept = delivered(crypto.randomUUID(), JSON.stringify({ DisableTelemetry: true }));
  // Large content is not in the row the snapshot read (content null): it is read on a cache miss, and this
  // policy is no longer in the database.
  const gone = delivered(crypto.randomUUID(), null);
  const before = typedContentCacheStats();
  const messages = await toPolicyMessages(db, [gone, kept], log);
  assert.deepEqual(messages.map((m) => m.id), [kept.id]);
  const after = typedContentCacheStats();
  assert.equal(after.contentReads, before.contentReads + 1, "the gone policy's content was looked for");
  // Asked again, it is looked for again (nothing about it was kept), and still left out.
  assert.deepEqual((await toPolicyMessages(db, [gone], log)).map((m) => m.id), []);
  assert.equal(typedContentCacheStats().contentReads, after.contentReads + 1);
});
