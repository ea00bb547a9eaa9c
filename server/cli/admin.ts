/**
 * `svc-server` admin subcommands: what an operator does on the host without the UI.
 *
 *   svc-server reset-admin USERNAME      new password for an enabled Super Admin, printed once
 *   svc-server migrate [--status]        apply pending migrations, or list applied and pending ones
 *   svc-server create-token --group NAME [--valid-for 30m]
 *                                        one-time enrollment token for scripted installs (stdout only)
 *   svc-server check-config [--no-db]    validate the configuration, its files and the database
 *   svc-server healthcheck [--url URL]   probe the running server's /api/v1/version (container health check)
 *
 * Every subcommand takes `--config FILE` and `--dev` like the server itself. Changes are audited in the same
 * transaction as the change, with the actor `svc-server cli` (there is no logged-in user on the host).
 * On the embedded database the server holds an exclusive lock on the data directory, so these commands say
 * "stop the server first" instead of opening a database another process is writing.
 */
import { secretsKeyFile } from "../pki/server_pki.ts";
import { join } from "node:path";
import { ConfigError, loadConfig, type ServerConfig } from "../config/config.ts";
import { type Db, knownMigrations, migrate, openDatabase, type Queryable } from "../db/mod.ts";
import { insertAuditEvent } from "../audit/db_sink.ts";
import type { AuditEvent } from "../audit/event.ts";
import { SUPER_ADMIN } from "../../shared/builtin_roles.ts";
import { generatePassword } from "../auth/password.ts";
import { setPassword } from "../auth/users.ts";
import { createEnrollmentToken, MAX_ENROLLMENT_TOKEN_TTL_MS } from "../domain/node_groups.ts";
import { INITIAL_PASSWORD_FILE } from "../auth/initial_admin.ts";
import { HEALTHCHECK_TIMEOUT_MS, healthcheckCaFile, healthcheckUrl, probeHealth } from "./healthcheck.ts";

/** Exit codes shared by every subcommand (documented in `--help`). */
export const EXIT = {
  ok: 0,
  /** Something went wrong that is not the operator's input (database unreachable, I/O). */
  failure: 1,
  /** Bad arguments or configuration. */
  usage: 2,
  /** The named thing does not exist (user, node group). */
  notFound: 3,
  /** `migrate --status`: migrations are pending. */
  pending: 4,
} as const;

/** The subcommands, for `svc-server --help` and dispatch. */
export const ADMIN_COMMANDS = [
  "reset-admin",
  "migrate",
  "create-token",
  "check-config",
  "healthcheck",
] as const;

const HELP: Record<(typeof ADMIN_COMMANDS)[number], string> = {
  "reset-admin": `usage: svc-server reset-admin USERNAME [--config FILE] [--dev]

Sets a new random password for USERNAME, who must be an enabled user holding the Super Admin role, ends
every session of that user, prints the password once and records an audit event.
Exit codes: 0 done, 1 failure, 2 usage or configuration, 3 no such Super Admin.`,
  migrate: `usage: svc-server migrate [--status] [--config FILE] [--dev]

Without --status: applies pending database migrations (the server also does this at start).
With --status: lists every migration as applied (with its time) or pending, and changes nothing.
Exit codes: 0 done / up to date, 1 failure, 2 usage or configuration, 4 (--status) migrations are pending.`,
  "create-token": `usage: svc-server create-token --group NAME [--valid-for DURATION] [--config FILE] [--dev]

Creates a one-time enrollment token for the node group NAME and prints only the token on stdout, for
scripted installs (svc-agent --token-file). DURATION is like 300s, 30m or 12h (default 5m, at most 24h).
Exit codes: 0 done, 1 failure, 2 usage or configuration, 3 no such node group.`,
  "check-config": `usage: svc-server check-config [--no-db] [--config FILE] [--dev]

Loads the configuration exactly as the server would, checks that every file it names is readable, and
(unless --no-db) that the database answers. Prints one line per check.
Exit codes: 0 valid, 1 a file or the database is not usable, 2 the configuration itself is invalid.`,
  healthcheck: `usage: svc-server healthcheck [--url URL] [--config FILE] [--dev]

Asks the running server for /api/v1/version, as a container runtime or load balancer would, and prints the
version it answered. Without --url it asks https://<server.address, or 127.0.0.1>:<server.enrollment_port>,
trusting the internal CA ({data_dir}/pki/ca/ca.crt, or ca.cert_file) and the system store; with a web-port
certificate that does not name 127.0.0.1, pass --url with a name it does. Needs no database and no shell or
curl in the image. Waits at most ${HEALTHCHECK_TIMEOUT_MS / 1000} s.
Exit codes: 0 healthy, 1 not answering or not an svc server, 2 usage or configuration.`,
};

interface Parsed {
  positional: string[];
  flags: Map<string, string | true>;
}

/** Flags that take a value; every other flag is a switch. */
const VALUE_FLAGS = new Set(["--config", "--group", "--valid-for", "--url"]);

function parse(args: string[], allowed: string[]): Parsed {
  const out: Parsed = { positional: [], flags: new Map() };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (!arg.startsWith("--")) {
      out.positional.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq > 0 ? arg.slice(0, eq) : arg;
    if (!allowed.includes(name)) throw new UsageError(`unknown option ${name}`);
    if (VALUE_FLAGS.has(name)) {
      const value = eq > 0 ? arg.slice(eq + 1) : args[++i];
      if (value === undefined || value === "") throw new UsageError(`${name} needs a value`);
      out.flags.set(name, value);
    } else {
      if (eq > 0) throw new UsageError(`${name} takes no value`);
      out.flags.set(name, true);
    }
  }
  return out;
}

class UsageError extends Error {}
class NotFoundError extends Error {}

/** Output sinks (tests capture them). */
export interface CliIo {
  out(line: string): void;
  err(line: string): void;
}

const CONSOLE_IO: CliIo = { out: (l) => console.log(l), err: (l) => console.error(l) };

/** Runs one admin subcommand; resolves to the process exit code. */
export async function runAdminCommand(args: string[], io: CliIo = CONSOLE_IO): Promise<number> {
  const [command, ...rest] = args;
  const name = command as (typeof ADMIN_COMMANDS)[number];
  if (!ADMIN_COMMANDS.includes(name)) {
    io.err(`svc-server: unknown command ${command}; commands: ${ADMIN_COMMANDS.join(", ")}`);
    return EXIT.usage;
  }
  if (rest.includes("--help") || rest.includes("-h")) {
    io.out(HELP[name]);
    return EXIT.ok;
  }
  try {
    switch (name) {
      case "reset-admin":
        return await resetAdmin(parse(rest, ["--config", "--dev"]), io);
      case "migrate":
        return await migrateCommand(parse(rest, ["--config", "--dev", "--status"]), io);
      case "create-token":
        return await createToken(parse(rest, ["--config", "--dev", "--group", "--valid-for"]), io);
      case "check-config":
        return await checkConfig(parse(rest, ["--config", "--dev", "--no-db"]), io);
      case "healthcheck":
        return await healthcheck(parse(rest, ["--config", "--dev", "--url"]), io);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`svc-server ${name}: ${err.message}\n\n${HELP[name]}`);
      return EXIT.usage;
    }
    if (err instanceof ConfigError) {
      io.err(`svc-server ${name}: configuration error: ${err.message}`);
      return EXIT.usage;
    }
    if (err instanceof NotFoundError) {
      io.err(`svc-server ${name}: ${err.message}`);
      return EXIT.notFound;
    }
    io.err(`svc-server ${name}: ${(err as Error).message}`);
    return EXIT.failure;
  }
}

/** Loads the configuration the way `svc-server` does (same file lookup, same `--dev` defaults). */
export async function loadCliConfig(flags: Map<string, string | true>): Promise<ServerConfig> {
  const explicit = flags.get("--config") as string | undefined;
  const path = explicit ?? Deno.env.get("SVC_CONFIG") ?? "/etc/svc/server.yaml";
  return await loadConfig({
    path,
    explicitPath: explicit !== undefined || Deno.env.get("SVC_CONFIG") !== undefined,
    overrides: flags.has("--dev") ? DEV_OVERRIDES : {},
  });
}

/** What `--dev` changes (shared with `svc-server --dev`). */
export const DEV_OVERRIDES: Record<string, unknown> = {
  "server.data_dir": ".svc-data",
  "disk_encryption.create_kek_file": true,
};

async function withDatabase<T>(config: ServerConfig, fn: (db: Db) => Promise<T>): Promise<T> {
  const db = await openDatabase({
    url: config.database.url,
    dataDir: config.server.dataDir,
    poolSize: config.database.poolSize,
  });
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

const CLI_ACTOR = { username: "svc-server cli" };

async function audit(q: Queryable, event: Omit<AuditEvent, "actor" | "outcome" | "sourceIp">): Promise<void> {
  await insertAuditEvent(q, { ...event, actor: CLI_ACTOR, outcome: "success", sourceIp: "local" });
}

async function resetAdmin(args: Parsed, io: CliIo): Promise<number> {
  if (args.positional.length !== 1) throw new UsageError("name exactly one USERNAME");
  const username = args.positional[0];
  const config = await loadCliConfig(args.flags);
  const password = generatePassword();
  await withDatabase(config, async (db) => {
    await migrate(db);
    await db.transaction(async (tx) => {
      const [user] = await tx.query<{ id: string; enabled: boolean }>(
        `SELECT u.id, u.enabled FROM users u
          WHERE u.username = $1 AND EXISTS (
            SELECT 1 FROM role_bindings b JOIN roles r ON r.id = b.role_id
             WHERE r.name = $2 AND b.scope_type = 'global' AND (b.user_id = u.id OR b.user_group_id IN
               (SELECT m.user_group_id FROM user_group_members m WHERE m.user_id = u.id)))`,
        [username, SUPER_ADMIN],
      );
      if (!user) {
        throw new NotFoundError(
          `no user "${username}" holds the ${SUPER_ADMIN} role: name an existing Super Admin ` +
            '(the initial one is "admin")',
        );
      }
      if (!user.enabled) {
        throw new NotFoundError(
          `user "${username}" is disabled: enable it in the UI or name another Super Admin`,
        );
      }
      await setPassword(tx, user.id, password);
      await audit(tx, {
        action: "user.password_reset",
        resource: { type: "user", id: user.id, name: username },
        details: { via: "svc-server reset-admin", sessions_revoked: true },
      });
    });
  });
  // The initial password file would now be wrong: remove it so nobody trusts it.
  await Deno.remove(join(config.server.dataDir, INITIAL_PASSWORD_FILE)).catch(() => {});
  io.out(`svc: new password for ${username} (shown once): ${password}`);
  return EXIT.ok;
}

async function migrateCommand(args: Parsed, io: CliIo): Promise<number> {
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  const config = await loadCliConfig(args.flags);
  const known = await knownMigrations();
  return await withDatabase(config, async (db) => {
    if (!args.flags.has("--status")) {
      const applied = await migrate(db, known);
      io.out(applied.length ? `applied: ${applied.join(", ")}` : "database is up to date");
      return EXIT.ok;
    }
    const exists = await db.query<{ t: string | null }>(`SELECT to_regclass('schema_migrations')::text AS t`);
    const rows = exists[0]?.t
      ? await db.query<{ version: string; applied_at: Date }>(
        "SELECT version, applied_at FROM schema_migrations ORDER BY version",
      )
      : [];
    const done = new Map(rows.map((r) => [r.version, r.applied_at]));
    let pending = 0;
    for (const m of known) {
      const at = done.get(m.version);
      if (!at) pending++;
      io.out(`${m.version} ${m.name.padEnd(32)} ${at ? `applied ${at.toISOString()}` : "pending"}`);
    }
    const unknown = rows.filter((r) => !known.some((m) => m.version === r.version));
    for (const r of unknown) {
      io.out(`${r.version} ${"(not in this build)".padEnd(32)} applied ${r.applied_at.toISOString()}`);
    }
    if (unknown.length > 0) {
      io.err(
        `warning: the database has ${unknown.length} migration(s) this build does not know: ` +
          "it was used by a newer svc-server",
      );
    }
    io.out(pending ? `${pending} pending` : "up to date");
    return pending ? EXIT.pending : EXIT.ok;
  });
}

/** Parses `300s`, `30m`, `12h` into milliseconds; refuses anything else. */
export function parseDuration(text: string): number {
  const m = /^(\d{1,6})(s|m|h)$/.exec(text);
  if (!m) throw new UsageError(`--valid-for "${text}" is not a duration like 300s, 30m or 12h`);
  const ms = Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[m[2] as "s" | "m" | "h"];
  if (ms < 60_000 || ms > MAX_ENROLLMENT_TOKEN_TTL_MS) {
    throw new UsageError(`--valid-for must be between 1m and ${MAX_ENROLLMENT_TOKEN_TTL_MS / 3_600_000}h`);
  }
  return ms;
}

async function createToken(args: Parsed, io: CliIo): Promise<number> {
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  const group = args.flags.get("--group");
  if (typeof group !== "string") throw new UsageError("--group NAME is required");
  const validFor = args.flags.get("--valid-for");
  const ttlMs = typeof validFor === "string" ? parseDuration(validFor) : undefined;
  const config = await loadCliConfig(args.flags);
  const token = await withDatabase(config, async (db) => {
    await migrate(db);
    return await db.transaction(async (tx) => {
      const [row] = await tx.query<{ id: string }>("SELECT id FROM node_groups WHERE name = $1", [group]);
      if (!row) throw new NotFoundError(`no node group named "${group}": create it first (UI or REST)`);
      const created = await createEnrollmentToken(tx, row.id, { createdBy: CLI_ACTOR.username, ttlMs });
      await audit(tx, {
        action: "enrollment_token.create",
        resource: { type: "node_group", id: row.id, name: group },
        details: { via: "svc-server create-token", expires_at: created.expires_at.toISOString() },
      });
      return created;
    });
  });
  io.out(token.token);
  io.err(`token for node group "${group}" expires at ${token.expires_at.toISOString()} and works once`);
  return EXIT.ok;
}

async function checkConfig(args: Parsed, io: CliIo): Promise<number> {
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  const config = await loadCliConfig(args.flags);
  io.out("ok   configuration parses and every key is valid");
  let bad = 0;
  const files: Array<[string, string]> = [
    ["tls.cert_file", config.tls.certFile],
    ["tls.key_file", config.tls.keyFile],
    ["ca.cert_file", config.ca.certFile],
    ["ca.key_file", config.ca.keyFile],
    ["metrics.tls_cert_file", config.metrics.tlsCertFile],
    ["metrics.tls_key_file", config.metrics.tlsKeyFile],
    ["audit.syslog.tls_ca_file", config.audit.syslog.tlsCaFile],
  ];
  if (!config.diskEncryption.createKekFile) {
    files.push(["disk_encryption.kek_file", config.diskEncryption.kekFile]);
  }
  for (const [key, path] of files) {
    if (!path) continue;
    try {
      const f = await Deno.open(path, { read: true });
      f.close();
      io.out(`ok   ${key}: ${path} is readable`);
    } catch (err) {
      bad++;
      io.out(`FAIL ${key}: cannot read ${path}: ${(err as Error).message}`);
    }
  }
  if (!config.security.jwtSecret) {
    io.out(
      `ok   security.jwt_secret is empty: the session secret kept in the database is used (sealed by ${
        secretsKeyFile(config)
      })`,
    );
  }
  if (!args.flags.has("--no-db")) {
    try {
      await withDatabase(config, async (db) => {
        await db.query("SELECT 1");
        const known = await knownMigrations();
        const exists = await db.query<{ t: string | null }>(
          `SELECT to_regclass('schema_migrations')::text AS t`,
        );
        const applied = exists[0]?.t
          ? (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM schema_migrations"))[0].n
          : 0;
        io.out(
          `ok   database (${db.driver}) answers; ${applied} of ${known.length} migrations applied` +
            (applied < known.length ? " (the server applies the rest at start)" : ""),
        );
      });
    } catch (err) {
      bad++;
      io.out(`FAIL database: ${(err as Error).message}`);
    }
  }
  return bad ? EXIT.failure : EXIT.ok;
}

async function healthcheck(args: Parsed, io: CliIo): Promise<number> {
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  const config = await loadCliConfig(args.flags);
  const explicit = args.flags.get("--url");
  let url = healthcheckUrl(config);
  if (typeof explicit === "string") {
    const parsed = URL.parse(explicit);
    if (!parsed || (parsed.protocol !== "https:" && parsed.protocol !== "http:")) {
      throw new UsageError(`--url "${explicit}" is not an http(s) URL like https://svc.example:8443`);
    }
    // A base URL means the server's version route; a full URL is asked as given.
    url = parsed.pathname === "/" ? new URL("/api/v1/version", parsed).href : parsed.href;
  }
  const result = await probeHealth(url, { caFile: healthcheckCaFile(config) });
  if (!result.healthy) {
    io.err(`svc-server healthcheck: unhealthy: ${result.reason}`);
    return EXIT.failure;
  }
  io.out(`healthy: ${url} answered version ${result.version}`);
  return EXIT.ok;
}
