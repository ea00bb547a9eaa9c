/** Fixtures shared by the policy-domain tests: a test server with the domain routes, seeded nodes, hub events. */
import assert from "node:assert/strict";
import type { Db, Queryable } from "../../server/db/db.ts";
import { domainRoutes } from "../../server/http/routes/mod.ts";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, type TestClient, type TestResponse, type TestServer } from "../helpers/app.ts";

/** Valid content for a few types. */
export const CONTENT = {
  Firefox: JSON.stringify({ DisableTelemetry: true }),
  Polkit: JSON.stringify({
    rules: [{ action_ids: ["org.freedesktop.udisks2.filesystem-mount"], result: "POLKIT_RESULT_AUTH_ADMIN" }],
  }),
  Dconf: JSON.stringify({
    entries: [{ schema_id: "org.gnome.desktop.screensaver", key: "lock-delay", value: "uint32 0" }],
  }),
};

/** A test server with the domain routes and a Super Admin client. */
export async function domainServer(db: Db): Promise<{ server: TestServer; admin: TestClient }> {
  const server = await createTestServer({ db, routes: (ctx) => domainRoutes(ctx) });
  const admin = await server.loginAs({ superAdmin: true });
  return { server, admin };
}

/**
 * A {@linkcode dbTest} run with a domain server on the test's database and its Super Admin client; the server
 * is closed after `fn`, however it ends.
 */
export function domainTest(
  name: string,
  fn: (fixture: { db: Db; server: TestServer; admin: TestClient }, t: Deno.TestContext) => Promise<void>,
  options?: Parameters<typeof dbTest>[2],
): void {
  dbTest(name, async (db, t) => {
    const { server, admin } = await domainServer(db);
    try {
      await fn({ db, server, admin }, t);
    } finally {
      await server.close();
    }
  }, options);
}

/**
 * A Db that counts the statements run in its transactions and, with `outside`, those run outside one too:
 * how tests show that a query count does not grow with the fleet.
 */
export function countingDb(db: Db, options: { outside: boolean }): { db: Db; count: () => number } {
  let n = 0;
  const counted: Db = {
    ...db,
    query: options.outside
      ? (sql, params) => {
        n++;
        return db.query(sql, params);
      }
      : db.query.bind(db),
    transaction: (fn) =>
      db.transaction((tx) =>
        fn({
          query(sql, params) {
            n++;
            return tx.query(sql, params);
          },
        })
      ),
  };
  return { db: counted, count: () => n };
}

/** Asserts a status and returns the JSON body; the message shows the body on failure. */
// deno-lint-ignore no-explicit-any
export function expectStatus(res: TestResponse, status: number): any {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${res.text}`);
  return res.json;
}

/** Creates a policy over HTTP and returns it. */
export async function createPolicy(
  client: TestClient,
  input: { name: string; type?: keyof typeof CONTENT | string; content?: string; description?: string },
  // deno-lint-ignore no-explicit-any
): Promise<any> {
  const type = input.type ?? "Firefox";
  const content = input.content ?? CONTENT[type as keyof typeof CONTENT] ?? "{}";
  return expectStatus(
    await client.request("POST", "/api/v1/policies/all", {
      name: input.name,
      type,
      content,
      description: input.description,
    }),
    201,
  );
}

/** Moves a policy to `state` over HTTP (must succeed). */
export async function setState(client: TestClient, id: string, state: string): Promise<void> {
  expectStatus(await client.request("PUT", `/api/v1/policies/all/${id}/state`, { state }), 200);
}

/** Creates a node group over HTTP. */
export async function createGroup(client: TestClient, name: string): Promise<string> {
  return expectStatus(await client.request("POST", "/api/v1/node-groups", { name }), 201).id;
}

/** Creates a binding over HTTP; `enabled` also enables it. */
export async function bind(
  client: TestClient,
  policyId: string,
  groupId: string,
  options: { priority?: number; enabled?: boolean } = {},
): Promise<string> {
  const binding = expectStatus(
    await client.request("POST", "/api/v1/policy-bindings", {
      policy_id: policyId,
      node_group_id: groupId,
      priority: options.priority ?? 0,
    }),
    201,
  );
  if (options.enabled) {
    expectStatus(
      await client.request("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" }),
      200,
    );
  }
  return binding.id;
}

/** Changes a binding over HTTP (`state`, `priority`; must succeed) and returns it. */
// deno-lint-ignore no-explicit-any
export async function putBinding(client: TestClient, id: string, body: unknown): Promise<any> {
  return expectStatus(await client.request("PUT", `/api/v1/policy-bindings/${id}`, body), 200);
}

/** Inserts a node directly (enrollment is another area); returns its id. */
export async function seedNode(
  q: Queryable,
  input: {
    name: string;
    groups?: string[];
    status?: string;
    os?: string;
    agentVersion?: string;
    desktops?: string[];
    fqdn?: string;
    serials?: string[];
  },
): Promise<string> {
  const serials = input.serials ?? [];
  const [row] = await q.query<{ id: string }>(
    `INSERT INTO nodes (name, status, os_name, agent_version, desktop_environments, fqdn, cert_serial, cert_not_after)
     VALUES ($1, $2, $3, $4, $5::text[], $6, $7, now() + interval '90 days') RETURNING id`,
    [
      input.name,
      input.status ?? "unknown",
      input.os ?? "",
      input.agentVersion ?? "",
      input.desktops ?? [],
      input.fqdn ?? "",
      serials.at(-1) ?? null,
    ],
  );
  for (const serial of serials) {
    await q.query(
      "INSERT INTO node_certificates (serial, node_id, not_before, not_after) VALUES ($1, $2, now(), now() + interval '90 days')",
      [serial, row.id],
    );
  }
  for (const group of input.groups ?? []) {
    await q.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [row.id, group]);
  }
  return row.id;
}

/** Hub events in revision order, as sorted group-id lists. */
export async function hubEvents(q: Queryable): Promise<{ revision: number; groups: string[] }[]> {
  const rows = await q.query<{ revision: number; node_group_ids: string[] }>(
    "SELECT revision, node_group_ids FROM hub_events ORDER BY revision",
  );
  return rows.map((r) => ({ revision: r.revision, groups: [...r.node_group_ids].sort() }));
}

/** Inserts a compliance result directly (reporting is the gRPC area). */
export async function report(
  q: Queryable,
  nodeId: string,
  policyId: string,
  status: string,
  options: { message?: string; version?: number } = {},
): Promise<void> {
  await q.query(
    `INSERT INTO compliance_results (node_id, policy_id, policy_version, status, message, items)
     VALUES ($1, $2, $3, $4, $5, $6::text::jsonb)
     ON CONFLICT (node_id, policy_id) DO UPDATE SET status = EXCLUDED.status, message = EXCLUDED.message`,
    [
      nodeId,
      policyId,
      options.version ?? 1,
      status,
      options.message ?? "",
      JSON.stringify([{ schema_id: "s", key: "k", status, message: "" }]),
    ],
  );
}
