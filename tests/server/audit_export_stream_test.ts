/**
 * The audit export never ends half-way without the client knowing: bad filters are refused before a byte is
 * streamed, and a database failure in the middle of a large export aborts the download (in-process the body
 * read rejects; through the real web port the client's read fails) instead of a clean, truncated 200.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { startAgentServer } from "../helpers/agents.ts";
import type { Db } from "../../server/db/db.ts";

/** Enough rows for several pulls of the export stream. */
async function fillAuditLog(db: Db, rows: number): Promise<void> {
  await db.query(
    `INSERT INTO audit_logs (username, action, resource_type, resource_name, outcome, details)
     SELECT 'filler', 'update', 'policy', repeat('n', 200) || i, 'success', '{}'::jsonb
       FROM generate_series(1, $1) AS i`,
    [rows],
  );
}

/** Makes every later read of the audit log fail, as a database going away would. */
async function breakAuditLog(db: Db): Promise<void> {
  await db.query("ALTER TABLE audit_logs RENAME TO audit_logs_gone");
}

async function readAll(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<number> {
  let bytes = 0;
  while (true) {
    const { done, value } = await reader.read();
    if (done) return bytes;
    bytes += value.byteLength;
  }
}

for (const format of ["csv", "json"]) {
  dbTest(`a ${format} export that fails midway aborts the download`, async (db) => {
    await fillAuditLog(db, 30_000);
    const server = await startAgentServer(db);
    const base = `https://localhost:${server.webPort}`;
    const client = Deno.createHttpClient({ caCerts: [server.ctx.ca.certPem], http2: true, http1: false });
    const client1 = Deno.createHttpClient({ caCerts: [server.ctx.ca.certPem], http2: false, http1: true });
    try {
      const admin = await server.test.loginAs({ superAdmin: true });
      const session = [...admin.cookies].map(([n, c]) => `${n}=${c.value}`).join("; ");

      // In-process first: the status is decided before streaming, the failure surfaces as a rejected read.
      const res = await server.test.fetch(
        new Request(`https://svc.test/api/v1/audit-logs/export?format=${format}`, {
          headers: { cookie: session, "x-svc-remote-addr": "127.0.0.1" },
        }),
      );
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      const first = await reader.read();
      assert.ok(first.value && first.value.byteLength > 0);

      // Through the web port over HTTP/2 and HTTP/1.1: downloads started and read a little before the table
      // goes away.
      const remoteReaders = [];
      for (const c of [client, client1]) {
        const remote = await fetch(`${base}/api/v1/audit-logs/export?format=${format}`, {
          client: c,
          headers: { cookie: session },
        });
        assert.equal(remote.status, 200);
        const remoteReader = remote.body!.getReader();
        await remoteReader.read();
        remoteReaders.push(remoteReader);
      }

      await breakAuditLog(db);
      await assert.rejects(readAll(reader), "the in-process body must fail, not end cleanly");
      for (const [i, r] of remoteReaders.entries()) {
        await assert.rejects(readAll(r), `the HTTP/${i === 0 ? 2 : 1.1} client must see the download fail`);
      }
      await db.query("ALTER TABLE audit_logs_gone RENAME TO audit_logs");

      // A filter the database cannot take is a 400 before any byte.
      const refused = await fetch(`${base}/api/v1/audit-logs/export?format=${format}&user=%00`, {
        client,
        headers: { cookie: session },
      });
      assert.equal(refused.status, 400);
      assert.equal((await refused.json()).error.fields[0].field, "user");
    } finally {
      client.close();
      client1.close();
      await server.stop();
    }
  });
}
