/**
 * What the stream benchmarks (fanout, replica_set, stream_memory) set up in svc's database before agents
 * connect: one node group, released policies of a chosen size bound to it, and enrollment tokens for it.
 */
import postgres from "postgres";
import type { Db } from "../server/db/mod.ts";
import { createEnrollmentToken, createNodeGroup } from "../server/domain/node_groups.ts";
import { changePolicyState, createPolicy } from "../server/domain/policies.ts";
import { createBinding, updateBinding } from "../server/domain/bindings.ts";

/**
 * Creates node group `name` with `policies` released BenchBlob policies (`name-0`, `name-1`, …) of about
 * `bytes` bytes each, bound to it (the bindings enabled when `enable`), and `tokens` enrollment tokens into it
 * valid for an hour. Answers the group's id, the bindings' ids in policy order and the tokens.
 */
export async function benchFleet(
  db: Db,
  o: { name: string; policies: number; bytes: number; enable: boolean; tokens: number },
): Promise<{ group: string; bindings: string[]; tokens: string[] }> {
  const group = (await db.transaction((tx) => createNodeGroup(tx, { name: o.name }))).id;
  const bindings = await db.transaction(async (tx) => {
    const ids: string[] = [];
    for (let i = 0; i < o.policies; i++) {
      const policy = await createPolicy(tx, {
        name: `${o.name}-${i}`,
        type: "BenchBlob",
        content: JSON.stringify({ i, blob: "x".repeat(o.bytes) }),
        createdBy: "bench",
      });
      await changePolicyState(tx, policy.id, "released");
      const binding = await createBinding(tx, { policyId: policy.id, nodeGroupId: group });
      if (o.enable) await updateBinding(tx, binding.id, { state: "enabled" });
      ids.push(binding.id);
    }
    return ids;
  });
  const tokens = await Promise.all(
    Array.from(
      { length: o.tokens },
      async () => (await createEnrollmentToken(db, group, { createdBy: "bench", ttlMs: 3_600_000 })).token,
    ),
  );
  return { group, bindings, tokens };
}

/** A database of the benchmark's own on the server of the `--database-url`. */
export interface BenchDatabase {
  name: string;
  /** Its URL (the `--database-url` with the new database's name). */
  url: URL;
  /** Drops it (whoever is still connected) and closes the connection that created it. */
  drop(): Promise<void>;
}

/** Creates an empty database named `prefix` and a random suffix on the server `databaseUrl` points at. */
export async function createBenchDatabase(databaseUrl: string, prefix: string): Promise<BenchDatabase> {
  const name = `${prefix}${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const url = new URL(databaseUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url,
    async drop() {
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}
