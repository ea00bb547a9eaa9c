/** The audit trail: what is recorded for success, failure and denial, redaction, source address, reading, export, retention. */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, serverTest } from "../helpers/app.ts";
import { purgeAuditLogs } from "../../server/audit/retention.ts";
import { redact, REDACTED } from "../../server/audit/redact.ts";
import { csvCell } from "../../server/audit/csv.ts";

interface Row {
  action: string;
  outcome: string;
  resource_type: string;
  resource_id: string;
  resource_name: string;
  username: string;
  user_id: string | null;
  source_ip: string;
  details: Record<string, unknown>;
}

serverTest("success, failure and denial each leave a row with the real resource id", async (server, db) => {
  const manager = await server.loginAs({
    permissions: ["user_group:create", "user_group:delete", "user_group:view"],
    username: "manager",
    ip: "192.0.2.50",
  });
  const created = await manager.request("POST", "/api/v1/user-groups", {
    name: "ops",
    description: "operators",
  });
  assert.equal(created.status, 201);
  const dup = await manager.request("POST", "/api/v1/user-groups", { name: "ops" });
  assert.equal(dup.status, 409);
  const ghost = crypto.randomUUID();
  assert.equal((await manager.request("DELETE", `/api/v1/user-groups/${ghost}`)).status, 404);
  const outsider = await server.loginAs({ permissions: ["user_group:view"], username: "outsider" });
  assert.equal((await outsider.request("DELETE", `/api/v1/user-groups/${created.json.id}`)).status, 403);
  assert.equal(
    (await outsider.request("GET", "/api/v1/users")).status,
    403,
    "denied reads are recorded too",
  );

  const rows = await db.query<Row>(
    `SELECT action, outcome, resource_type, resource_id, resource_name, username, user_id, source_ip, details
         FROM audit_logs WHERE action <> 'auth.login' ORDER BY id`,
  );
  assert.equal(rows.length, 5);
  const [ok, conflict, missing, denied, deniedRead] = rows;
  assert.deepEqual(
    { ...ok, details: undefined },
    {
      action: "create",
      outcome: "success",
      resource_type: "user_group",
      resource_id: created.json.id,
      resource_name: "ops",
      username: "manager",
      user_id: manager.user.id,
      source_ip: "192.0.2.50",
      details: undefined,
    },
  );
  assert.deepEqual(ok.details, {
    method: "POST",
    path: "/api/v1/user-groups",
    status: 201,
    body: { name: "ops", description: "operators" },
  });
  assert.equal(conflict.outcome, "failure");
  assert.equal(conflict.resource_name, "ops");
  assert.equal(conflict.details.status, 409);
  assert.equal(missing.outcome, "failure");
  assert.equal(missing.action, "delete");
  assert.equal(missing.resource_id, ghost, "the id from the path, even when nothing was found");
  assert.equal(denied.action, "access_denied");
  assert.equal(denied.outcome, "denied");
  assert.equal(denied.resource_id, created.json.id);
  assert.equal(denied.username, "outsider");
  assert.equal(denied.details.required_permission, "user_group:delete");
  assert.equal(deniedRead.details.required_permission, "user:view");
});

serverTest("secrets in request bodies never reach the audit log", async (server, db) => {
  const admin = await server.loginAs({ superAdmin: true });
  await admin.request("POST", "/api/v1/users", { username: "u1", password: "super-secret-value-1" });
  const dump = JSON.stringify(await db.query("SELECT * FROM audit_logs"));
  assert.ok(!dump.includes("super-secret-value-1"));
  assert.ok(!dump.includes(admin.password), "login password absent too");
  const [row] = await db.query<{ details: { body: Record<string, unknown> } }>(
    "SELECT details FROM audit_logs WHERE action = 'create' AND resource_type = 'user'",
  );
  assert.deepEqual(row.details.body, { username: "u1", password: REDACTED });
});

Deno.test("redaction covers every secret-looking key at any depth", () => {
  const input = {
    name: "keep",
    Password: "x",
    nested: {
      apiKey: "x",
      "private-key": "x",
      list: [{ refresh_token: "x", value: "keep" }, { client_secret: "x" }],
      JWT: "x",
      passphrase: "x",
      credentials: { user: "x" },
      "X-Auth-Token": "x",
      second_factor: { code: "123456", backup_code: "x", status_code: 200, backup_codes: 9, totp: true },
      recovery_key: "x",
      error_code: "keep",
    },
    empty_password: "",
  };
  assert.deepEqual(redact(input), {
    name: "keep",
    Password: REDACTED,
    nested: {
      apiKey: REDACTED,
      "private-key": REDACTED,
      list: [{ refresh_token: REDACTED, value: "keep" }, { client_secret: REDACTED }],
      JWT: REDACTED,
      passphrase: REDACTED,
      credentials: REDACTED,
      "X-Auth-Token": REDACTED,
      second_factor: { code: REDACTED, backup_code: REDACTED, status_code: 200, backup_codes: 9, totp: true },
      recovery_key: REDACTED,
      error_code: "keep",
    },
    empty_password: "",
  });
  assert.equal(input.Password, "x", "the input is not modified");
});

dbTest("source address: X-Forwarded-For is honoured only from trusted proxies", async (db) => {
  const server = await createTestServer({
    db,
    config: { server: { trustedProxies: ["10.0.0.0/8", "2001:db8::/32"] } },
  });
  try {
    const viaProxy = await server.loginAs({ permissions: ["user_group:create"], ip: "10.1.2.3" });
    await viaProxy.raw("POST", "/api/v1/user-groups", {
      body: { name: "a" },
      // Client, then an inner proxy; the rightmost untrusted hop is the client.
      headers: { "x-forwarded-for": "198.51.100.77, 10.0.0.9" },
    });
    const spoofer = await server.loginAs({ permissions: ["user_group:create"], ip: "203.0.113.8" });
    await spoofer.raw("POST", "/api/v1/user-groups", {
      body: { name: "b" },
      headers: { "x-forwarded-for": "1.2.3.4" },
    });
    const chain = await server.loginAs({ permissions: ["user_group:create"], ip: "2001:db8::1" });
    await chain.raw("POST", "/api/v1/user-groups", {
      body: { name: "c" },
      // A client that sends its own fake first hop gains nothing: the proxy appended the real address.
      headers: { "x-forwarded-for": "6.6.6.6, 192.0.2.200" },
    });
    const rows = await db.query<{ resource_name: string; source_ip: string }>(
      "SELECT resource_name, source_ip FROM audit_logs WHERE action = 'create' ORDER BY id",
    );
    assert.deepEqual(rows, [
      { resource_name: "a", source_ip: "198.51.100.77" },
      { resource_name: "b", source_ip: "203.0.113.8" },
      { resource_name: "c", source_ip: "192.0.2.200" },
    ]);
  } finally {
    await server.close();
  }
});

serverTest(
  "list filters and pages; export is CSV-injection safe and JSON; exporting is audited",
  async (server, db) => {
    const admin = await server.loginAs({ superAdmin: true, username: "auditor-admin" });
    for (const name of ['=HYPERLINK("http://evil","x")', "+cmd", "plain", "@SUM(1)", "-2+3"]) {
      assert.equal((await admin.request("POST", "/api/v1/user-groups", { name })).status, 201);
    }
    await admin.request("POST", "/api/v1/user-groups", { name: "plain" });
    const other = await server.loginAs({ permissions: [], username: "nobody" });
    await other.request("GET", "/api/v1/audit-logs");

    const all = await admin.request("GET", "/api/v1/audit-logs?per_page=200");
    assert.equal(all.status, 200);
    assert.ok(all.json.items.length >= 9);
    const ids = all.json.items.map((r: { id: number }) => r.id);
    assert.deepEqual(ids, [...ids].sort((a, b) => b - a), "newest first");

    const creates = await admin.request(
      "GET",
      "/api/v1/audit-logs?action=create&resource_type=user_group&per_page=2",
    );
    assert.equal(creates.json.total, 6);
    assert.equal(creates.json.items.length, 2);
    assert.equal(creates.json.page, 1);
    assert.equal(creates.json.per_page, 2);
    const page3 = await admin.request(
      "GET",
      "/api/v1/audit-logs?action=create&resource_type=user_group&per_page=2&page=3",
    );
    assert.equal(page3.json.items.length, 2);
    const failures = await admin.request("GET", "/api/v1/audit-logs?outcome=failure");
    assert.equal(failures.json.total, 1, "the duplicate name");
    const byUser = await admin.request("GET", "/api/v1/audit-logs?user=nobody");
    assert.deepEqual(byUser.json.items.map((r: { action: string }) => r.action).sort(), [
      "access_denied",
      "auth.login",
    ]);
    const byId = await admin.request("GET", `/api/v1/audit-logs?user=${other.user.id}&action=access_denied`);
    assert.equal(byId.json.total, 1);
    const several = await admin.request("GET", "/api/v1/audit-logs?action=access_denied,auth.login");
    assert.equal(several.json.total, 3);
    const future = await admin.request("GET", "/api/v1/audit-logs?from=2999-01-01T00:00:00Z");
    assert.equal(future.json.total, 0);
    const past = await admin.request("GET", "/api/v1/audit-logs?to=2000-01-01");
    assert.equal(past.json.total, 0);
    const bad = await admin.request("GET", "/api/v1/audit-logs?from=yesterday");
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.fields[0].field, "from");
    const unknown = await admin.request("GET", "/api/v1/audit-logs?sort=id;drop");
    assert.equal(unknown.status, 400);

    const csv = await admin.request("GET", "/api/v1/audit-logs/export?format=csv&resource_type=user_group");
    assert.equal(csv.status, 200);
    assert.match(csv.headers.get("content-type")!, /^text\/csv/);
    assert.match(csv.headers.get("content-disposition")!, /attachment; filename="svc-audit-.*\.csv"/);
    const records = parseCsv(csv.text);
    assert.deepEqual(records[0].slice(0, 6), [
      "id",
      "created_at",
      "username",
      "user_id",
      "action",
      "outcome",
    ]);
    const names = records.slice(1).map((r) => r[8]);
    assert.ok(names.includes('\'=HYPERLINK("http://evil","x")'), JSON.stringify(names));
    assert.ok(names.includes("'+cmd"));
    assert.ok(names.includes("'@SUM(1)"));
    assert.ok(names.includes("'-2+3"));
    assert.ok(names.includes("plain"));
    for (const record of records) {
      for (const cell of record) {
        assert.ok(!/^[=+\-@\t\r]/.test(cell), `cell ${JSON.stringify(cell)} could run`);
      }
    }

    const json = await admin.request("GET", "/api/v1/audit-logs/export?format=json&action=create");
    assert.equal(json.status, 200);
    assert.equal(json.json.length, 6);
    assert.equal(json.json[0].resource_type, "user_group");
    assert.equal(
      json.json.find((r: { resource_name: string }) => r.resource_name.startsWith("=")).resource_name,
      '=HYPERLINK("http://evil","x")',
      "JSON keeps the value as is",
    );

    const exports = await db.query<{ username: string; details: { format: string } }>(
      "SELECT username, details FROM audit_logs WHERE action = 'audit_log.export' ORDER BY id",
    );
    assert.deepEqual(exports.map((e) => [e.username, e.details.format]), [["auditor-admin", "csv"], [
      "auditor-admin",
      "json",
    ]]);
  },
);

Deno.test("csv cells: quoting and formula neutralisation", () => {
  assert.equal(csvCell("a,b"), '"a,b"');
  assert.equal(csvCell('say "hi"'), '"say ""hi"""');
  assert.equal(csvCell("=1+1"), `"'=1+1"`);
  assert.equal(csvCell("  =1+1"), `"'  =1+1"`);
  assert.equal(csvCell("\t=1"), `"'\t=1"`);
  assert.equal(csvCell("\uFF1D1+1"), `"'\uFF1D1+1"`, "full-width equals sign");
  assert.equal(csvCell(null), '""');
  assert.equal(csvCell({ a: "=b" }), '"{""a"":""=b""}"');
  assert.equal(csvCell(-5), `"'-5"`);
});

dbTest("retention purges rows older than audit.retention_days, at start and on demand", async (db) => {
  const insert = (daysAgo: number, action: string) =>
    db.query(
      `INSERT INTO audit_logs (action, outcome, created_at) VALUES ($1, 'success', now() - make_interval(days => $2))`,
      [action, daysAgo],
    );
  await insert(400, "ancient");
  await insert(31, "old");
  await insert(29, "recent");
  const server = await createTestServer({ db, config: { audit: { retentionDays: 30 } } });
  try {
    // The job runs at start in the background; wait for it.
    for (let i = 0; i < 50; i++) {
      if ((await db.query("SELECT 1 FROM audit_logs WHERE action = 'audit_log.purge'")).length > 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const left = await db.query<{ action: string }>("SELECT action FROM audit_logs ORDER BY id");
    assert.deepEqual(left.map((r) => r.action), ["recent", "audit_log.purge"]);
    const [purge] = await db.query<{ details: { rows: number; retention_days: number } }>(
      "SELECT details FROM audit_logs WHERE action = 'audit_log.purge'",
    );
    assert.deepEqual(purge.details, { rows: 2, retention_days: 30 });

    await insert(10, "ten-days");
    assert.equal(await purgeAuditLogs(db, 0), 0, "0 disables retention");
    assert.equal(await purgeAuditLogs(db, 20), 1, "the 29-day-old row; the 10-day-old one stays");
    assert.equal(await purgeAuditLogs(db, 20), 0);
  } finally {
    await server.close();
  }
});

serverTest(
  "keyset paging returns every row exactly once while rows are added; totals without a full count",
  async (server, db) => {
    const admin = await server.loginAs({ superAdmin: true, username: "keyset-admin" });
    await db.query(
      `INSERT INTO audit_logs (action, resource_type, outcome)
       SELECT 'keyset.seed', 'thing', CASE WHEN i % 3 = 0 THEN 'failure' ELSE 'success' END
         FROM generate_series(1, 3200) i`,
    );
    const before = await db.query<{ id: string }>(
      "SELECT a.id::text AS id FROM audit_logs a ORDER BY a.id DESC",
    );
    const addRows = (n: number) =>
      db.query(
        `INSERT INTO audit_logs (action, resource_type, outcome)
         SELECT 'keyset.later', 'thing', 'success' FROM generate_series(1, ${n})`,
      );

    // Newer rows land on top while the pages are read: offset pages would shift and repeat rows.
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const path: string = `/api/v1/audit-logs?per_page=97${cursor ? `&cursor=${cursor}` : ""}`;
      const [res] = await Promise.all([admin.request("GET", path), addRows(13)]);
      assert.equal(res.status, 200, res.text);
      seen.push(...res.json.items.map((r: { id: number }) => String(r.id)));
      cursor = res.json.next_cursor;
      pages++;
    } while (cursor !== null && pages < 200);
    assert.equal(new Set(seen).size, seen.length, "no row twice");
    const older = seen.filter((id) => BigInt(id) <= BigInt(before[0].id));
    assert.deepEqual(older, before.map((r) => r.id), "every row present at the start, once, newest first");
    for (let i = 1; i < seen.length; i++) assert.ok(BigInt(seen[i]) < BigInt(seen[i - 1]), "newest first");

    // A page that ends exactly at the last row says there is no next one (3,200 seed rows = 32 x 100).
    let exact: string | null = null;
    for (let i = 0; i < 32; i++) {
      const res = await admin.request(
        "GET",
        `/api/v1/audit-logs?action=keyset.seed&per_page=100${exact ? `&cursor=${exact}` : ""}`,
      );
      assert.equal(res.json.items.length, 100, `page ${i + 1} is full`);
      exact = res.json.next_cursor;
      if (i < 31) assert.notEqual(exact, null, `page ${i + 1} has a next page`);
    }
    assert.equal(exact, null, "the exactly full last page has no next_cursor");

    // Offset pages still work, and a cursor beats a page number.
    const page2 = await admin.request("GET", "/api/v1/audit-logs?action=keyset.seed&per_page=10&page=2");
    assert.equal(page2.status, 200);
    const first = await admin.request("GET", "/api/v1/audit-logs?action=keyset.seed&per_page=10");
    const viaCursor = await admin.request(
      "GET",
      `/api/v1/audit-logs?action=keyset.seed&per_page=10&page=7&cursor=${first.json.next_cursor}`,
    );
    assert.deepEqual(viaCursor.json.items, page2.json.items);
    assert.equal(
      (await admin.request("GET", "/api/v1/audit-logs?cursor=-1")).status,
      400,
      "a cursor is the next_cursor of a page",
    );
    // Page numbers reach the newest 10,000 rows; deeper, the answer names the cursor instead of scanning.
    assert.equal((await admin.request("GET", "/api/v1/audit-logs?per_page=100&page=100")).status, 200);
    const deep = await admin.request("GET", "/api/v1/audit-logs?per_page=100&page=101");
    assert.equal(deep.status, 400);
    assert.match(JSON.stringify(deep.json), /by cursor/);
    assert.match(JSON.stringify(deep.json), /"page"/);
    const deepCursor = await admin.request(
      "GET",
      `/api/v1/audit-logs?per_page=100&page=101&cursor=${first.json.next_cursor}`,
    );
    assert.equal(deepCursor.status, 200, "with a cursor the page number is ignored");

    // By action: exact, from the per-action counts. Narrower filters: exact up to 1,000, estimated beyond.
    assert.equal(first.json.total, 3200);
    assert.equal(first.json.total_estimated, false);
    const failures = await admin.request("GET", "/api/v1/audit-logs?outcome=failure&resource_type=thing");
    assert.equal(failures.json.total_estimated, true);
    assert.ok(failures.json.total > 1000, String(failures.json.total));
    const few = await admin.request(
      "GET",
      "/api/v1/audit-logs?outcome=failure&action=keyset.seed&per_page=5",
    );
    assert.equal(few.json.total_estimated, true);
    const none = await admin.request("GET", "/api/v1/audit-logs?user=nobody-at-all");
    assert.deepEqual([none.json.total, none.json.total_estimated, none.json.next_cursor], [0, false, null]);
  },
);

/** RFC 4180 parser (quoted cells, doubled quotes, CRLF), independent of the exporter. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ",") {
      row.push(cell);
      cell = "";
    } else if (ch === "\r" && text[i + 1] === "\n") {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = "";
      i++;
    } else cell += ch;
  }
  if (cell !== "" || row.length > 0) rows.push([...row, cell]);
  return rows;
}
