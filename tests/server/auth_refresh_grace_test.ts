/**
 * Two tabs refreshing at once keep their session: tabs share the refresh cookie, so concurrent refreshes
 * present the same token; every one of them gets the same new session (the same successor refresh token)
 * within the grace period, while a replay after it still revokes the whole family. Truly concurrent
 * requests, on PGlite and PostgreSQL.
 */
import assert from "node:assert/strict";
import { serverTest, type TestClient, type TestServer } from "../helpers/app.ts";
import { REFRESH_REUSE_GRACE_SECONDS } from "../../server/auth/sessions.ts";

const REFRESH_PATH = "/api/v1/auth/refresh";

/** Another tab of the same browser: a client holding a copy of `of`'s cookies. */
function tab(server: TestServer, of: TestClient): TestClient {
  const copy = server.anonymous({ ip: of.ip });
  for (const [name, cookie] of of.cookies) copy.cookies.set(name, { ...cookie });
  copy.user = of.user;
  return copy;
}

/** Moves every use of a refresh token back past the grace period (instead of waiting it out). */
async function agePastGrace(server: TestServer): Promise<void> {
  await server.ctx.db.query(
    "UPDATE refresh_tokens SET used_at = used_at - make_interval(secs => $1::int) WHERE used_at IS NOT NULL",
    [REFRESH_REUSE_GRACE_SECONDS + 1],
  );
}

serverTest("tabs refreshing at the same moment all get the same new session", async (server) => {
  const first = await server.loginAs({ permissions: [], username: "tabs" });
  const tabs = [first, ...Array.from({ length: 4 }, () => tab(server, first))];
  const presented = first.cookie("svc_refresh")!;

  const answers = await Promise.all(tabs.map((t) => t.refresh()));
  for (const [i, res] of answers.entries()) assert.equal(res.status, 200, `tab ${i + 1}: ${res.text}`);
  const successors = new Set(tabs.map((t) => t.cookie("svc_refresh")));
  assert.equal(successors.size, 1, "every tab holds the same successor refresh token");
  assert.notEqual([...successors][0], presented, "and it is a new one");
  const families = await server.ctx.db.query<{ n: number }>(
    "SELECT count(DISTINCT family_id)::int AS n FROM refresh_tokens WHERE user_id = $1",
    [first.user.id],
  );
  assert.equal(families[0].n, 1, "still one session");
  const tokens = await server.ctx.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM refresh_tokens WHERE user_id = $1",
    [first.user.id],
  );
  assert.equal(tokens[0].n, 2, "one successor, not one per tab");
  for (const [i, t] of tabs.entries()) {
    assert.equal((await t.request("GET", "/api/v1/auth/me")).status, 200, `tab ${i + 1} is logged in`);
  }

  // The tabs keep refreshing together, round after round.
  for (let round = 0; round < 3; round++) {
    const again = await Promise.all(tabs.map((t) => t.refresh()));
    assert.deepEqual(again.map((r) => r.status), tabs.map(() => 200), `round ${round + 2}`);
    assert.equal(new Set(tabs.map((t) => t.cookie("svc_refresh"))).size, 1);
  }
  const reuse = await server.ctx.db.query("SELECT 1 FROM audit_logs WHERE action = 'auth.refresh_reuse'");
  assert.equal(reuse.length, 0, "no reuse was reported");

  // The database never holds a usable successor: only its hash and a copy sealed by the previous token.
  const rows = await server.ctx.db.query<{ successor_sealed: string | null }>(
    "SELECT successor_sealed FROM refresh_tokens WHERE user_id = $1",
    [first.user.id],
  );
  const newest = first.cookie("svc_refresh")!;
  assert.ok(rows.every((r) => !(r.successor_sealed ?? "").includes(newest)));
});

serverTest("a replay after the grace period still revokes the whole family", async (server) => {
  const owner = await server.loginAs({ permissions: [], username: "owner" });
  const stolen = owner.cookie("svc_refresh")!;
  assert.equal((await owner.refresh()).status, 200);
  await agePastGrace(server);

  const thief = server.anonymous({ ip: "127.0.0.66" });
  thief.cookies.set("svc_refresh", { value: stolen, path: REFRESH_PATH });
  const replay = await thief.refresh();
  assert.equal(replay.status, 401, replay.text);
  assert.equal(thief.cookie("svc_session") ?? "", "", "the thief gets no session");
  assert.equal((await owner.request("GET", "/api/v1/auth/me")).status, 401, "the family is revoked");
  assert.equal((await owner.refresh()).status, 401, "its newest refresh token too");
  const reuse = await server.ctx.db.query<{ source_ip: string }>(
    "SELECT source_ip FROM audit_logs WHERE action = 'auth.refresh_reuse'",
  );
  assert.deepEqual(reuse, [{ source_ip: "127.0.0.66" }]);
});

serverTest("the grace period never revives an ended session", async (server) => {
  const user = await server.loginAs({ permissions: [], username: "leaver" });
  const other = tab(server, user);
  assert.equal((await user.refresh()).status, 200);
  const logout = await user.request("POST", "/api/v1/auth/logout");
  assert.equal(logout.status, 204, logout.text);
  // The second tab still holds the token the first one just used: within the grace period, but the
  // session is over.
  assert.equal((await other.refresh()).status, 401);
});
