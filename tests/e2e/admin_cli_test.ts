/**
 * `svc-server` admin subcommands run as real processes against a real data directory: exit codes, what they
 * print, what they change (and audit), and that none of them opens an embedded database a running server
 * holds.
 */
import assert from "node:assert/strict";
import { stringify } from "yaml";
import { openDatabase } from "../../server/db/mod.ts";
import { verifyPassword } from "../../server/auth/password.ts";
import { sha256Hex } from "../../server/domain/node_groups.ts";
import { startServerProcess } from "../helpers/process.ts";

const MAIN = new URL("../../server/main.ts", import.meta.url).pathname;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function svcServer(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, ...args],
    env: { NO_COLOR: "1", SVC_CONFIG: "", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

async function configFile(dataDir: string, extra: Record<string, Record<string, unknown>> = {}) {
  const path = `${dataDir}.yaml`;
  await Deno.writeTextFile(path, stringify({ server: { data_dir: dataDir }, metrics: {}, ...extra }));
  return path;
}

Deno.test("every admin command answers --help with its usage and exit codes", async () => {
  for (const cmd of ["reset-admin", "migrate", "create-token", "check-config", "healthcheck"]) {
    const run = await svcServer([cmd, "--help"]);
    assert.deepEqual(run.code, 0, run.stderr);
    includes(run.stdout, `usage: svc-server ${cmd}`);
    includes(run.stdout, "Exit codes:");
  }
  const unknown = await svcServer(["reset-admin", "--frobnicate"]);
  assert.deepEqual(unknown.code, 2);
  includes(unknown.stderr, "unknown option --frobnicate");
});

Deno.test("check-config: valid, a bad key named with exit 2, an unreadable file with exit 1", async () => {
  const dir = await Deno.makeTempDir({ prefix: "svc-cli-" });
  try {
    const good = await configFile(`${dir}/data`);
    const ok = await svcServer(["check-config", "--config", good]);
    assert.deepEqual(ok.code, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /ok +database \(pglite\) answers/);

    const badKey = `${dir}/bad.yaml`;
    await Deno.writeTextFile(badKey, stringify({ server: { enrolment_port: 1 } }));
    const bad = await svcServer(["check-config", "--config", badKey, "--no-db"]);
    assert.deepEqual(bad.code, 2);
    includes(bad.stderr, `unknown configuration key "server.enrolment_port"`);

    const missing = await configFile(`${dir}/data2`, {
      tls: { cert_file: `${dir}/nope.crt`, key_file: `${dir}/nope.key` },
    });
    const fail = await svcServer(["check-config", "--config", missing, "--no-db"]);
    assert.deepEqual(fail.code, 1);
    includes(fail.stdout, `FAIL tls.cert_file: cannot read ${dir}/nope.crt`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("migrate --status reports pending (exit 4), migrate applies, then up to date (exit 0)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "svc-cli-" });
  try {
    const config = await configFile(`${dir}/data`);
    const before = await svcServer(["migrate", "--status", "--config", config]);
    assert.deepEqual(before.code, 4, before.stdout + before.stderr);
    assert.match(before.stdout, /^0001 initial_schema +pending$/m);
    const apply = await svcServer(["migrate", "--config", config]);
    assert.deepEqual(apply.code, 0, apply.stderr);
    assert.match(apply.stdout, /applied: 0001/);
    const after = await svcServer(["migrate", "--status", "--config", config]);
    assert.deepEqual(after.code, 0, after.stderr);
    assert.match(after.stdout, /^0001 initial_schema +applied \d{4}-/m);
    includes(after.stdout, "up to date");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("create-token and reset-admin change the database, audit it, and refuse while the server holds it", async () => {
  const proc = await startServerProcess();
  const dataDir = proc.dataDir;
  const oldPassword = await proc.adminPassword();
  const config = await configFile(dataDir);
  try {
    // The running server holds the embedded database: the command refuses instead of corrupting it.
    const busy = await svcServer(["reset-admin", "admin", "--config", config]);
    assert.deepEqual(busy.code, 1);
    includes(busy.stderr, "in use by another svc-server process");
  } finally {
    assert.deepEqual(await proc.stop(), 0);
  }

  const noGroup = await svcServer(["create-token", "--group", "lab", "--config", config]);
  assert.deepEqual(noGroup.code, 3);
  includes(noGroup.stderr, `no node group named "lab"`);

  let db = await openDatabase({ url: "", dataDir });
  await db.query("INSERT INTO node_groups (name) VALUES ('lab')");
  await db.close();

  const badTtl = await svcServer(["create-token", "--group", "lab", "--valid-for", "3d", "--config", config]);
  assert.deepEqual(badTtl.code, 2);
  includes(badTtl.stderr, `--valid-for "3d" is not a duration`);

  const made = await svcServer(["create-token", "--group", "lab", "--valid-for", "2h", "--config", config]);
  assert.deepEqual(made.code, 0, made.stderr);
  const token = made.stdout.trim();
  assert.match(token, /^[A-Za-z0-9_-]{43}$/, "stdout carries only the token");

  const noUser = await svcServer(["reset-admin", "nobody", "--config", config]);
  assert.deepEqual(noUser.code, 3);
  includes(noUser.stderr, `no user "nobody" holds the Super Admin role`);

  const reset = await svcServer(["reset-admin", "admin", "--config", config]);
  assert.deepEqual(reset.code, 0, reset.stderr);
  const newPassword = /shown once\): (\S+)/.exec(reset.stdout)?.[1] ?? "";
  assert.ok(newPassword.length >= 20, reset.stdout);
  assert.notEqual(newPassword, oldPassword);
  await assertRejectsNotFound(`${dataDir}/initial_admin_password`);

  db = await openDatabase({ url: "", dataDir });
  try {
    const [tok] = await db.query<{ expires_at: Date }>(
      "SELECT expires_at FROM enrollment_tokens WHERE token_hash = $1",
      [await sha256Hex(token)],
    );
    assert.ok(tok, "the printed token is stored (as its hash)");
    const hours = (tok.expires_at.getTime() - Date.now()) / 3_600_000;
    assert.ok(hours > 1.9 && hours <= 2, `token lives about 2h, got ${hours}`);

    const [admin] = await db.query<{ password_hash: string }>(
      "SELECT password_hash FROM users WHERE username = 'admin'",
    );
    assert.ok(await verifyPassword(newPassword, admin.password_hash), "the printed password works");
    assert.ok(!await verifyPassword(oldPassword, admin.password_hash), "the old password no longer works");

    const audit = await db.query<
      { action: string; username: string; resource_name: string; outcome: string }
    >(
      `SELECT action, username, resource_name, outcome FROM audit_logs
        WHERE action IN ('user.password_reset', 'enrollment_token.create') ORDER BY id`,
    );
    assert.deepEqual(audit, [
      {
        action: "enrollment_token.create",
        username: "svc-server cli",
        resource_name: "lab",
        outcome: "success",
      },
      {
        action: "user.password_reset",
        username: "svc-server cli",
        resource_name: "admin",
        outcome: "success",
      },
    ]);
  } finally {
    await db.close();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    await Deno.remove(config).catch(() => {});
  }
});

function includes(text: string, part: string): void {
  assert.ok(text.includes(part), `expected ${JSON.stringify(part)} in:\n${text}`);
}

async function assertRejectsNotFound(path: string): Promise<void> {
  const gone = await Deno.stat(path).then(() => false, (err) => err instanceof Deno.errors.NotFound);
  assert.ok(gone, `${path} should have been removed`);
}
