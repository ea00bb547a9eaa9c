/**
 * The `dconf` command as the Dconf type drives it: a scratch compile that vets a keyfile before it lands, the
 * compile of the real databases, and the read-back of what a session sees (a profile made from the node's with
 * every `system-db:` turned into a `file-db:` under the root, read with `dconf dump /` and `dconf list-locks /`).
 *
 * @module
 */

import type { EnforcerIO } from "../../sync/types.ts";
import { withScratchDir } from "../scratch.ts";
import { DCONF_DB_DIR, DCONF_FILE_NAME, DCONF_PROFILE_DIR } from "./render.ts";

/** What a session of one profile reads: values by full key path, and the locked paths; or why not. */
export type DconfSession = { values: Map<string, string>; locks: Set<string> } | string;

function toolMessage(result: { stderr: string; stdout: string; code: number }): string {
  const text = `${result.stderr}\n${result.stdout}`.trim().replace(/\s+/g, " ");
  return text ? text.slice(0, 1000) : `exit code ${result.code}`;
}

/** Compiles the keyfile of one database in a scratch directory; undefined when dconf accepts it. */
export function precompile(io: EnforcerIO, keyfile: string, locks: string): Promise<string | undefined> {
  return withScratchDir("svc-dconf-", async (scratch) => {
    await Deno.mkdir(`${scratch}/db.d/locks`, { recursive: true });
    await Deno.writeTextFile(`${scratch}/db.d/${DCONF_FILE_NAME}`, keyfile);
    await Deno.writeTextFile(`${scratch}/db.d/locks/${DCONF_FILE_NAME}`, locks);
    const result = await io.runner.run("dconf", ["compile", `${scratch}/db`, `${scratch}/db.d`], {
      timeoutMs: 60_000,
    });
    return result.success ? undefined : toolMessage(result);
  });
}

/** Reads what a session sees: `dconf dump /` and `dconf list-locks /` through a profile under the root. */
export async function readSession(io: EnforcerIO, profile: string): Promise<DconfSession> {
  const current = await io.fs.readTextFile(`${DCONF_PROFILE_DIR}/${profile}`);
  const lines: string[] = [];
  for (const raw of (current ?? "").split("\n")) {
    const system = /^\s*system-db:([A-Za-z0-9][A-Za-z0-9_-]*)\s*$/.exec(raw);
    if (system) lines.push(`file-db:${await io.fs.resolve(`${DCONF_DB_DIR}/${system[1]}`)}`);
    // Read-only defaults such as GDM's greeter database, also under the root.
    const file = /^\s*file-db:(\/\S+)\s*$/.exec(raw);
    if (file) {
      const resolved = await io.fs.resolve(file[1]).catch(() => undefined);
      if (resolved) lines.push(`file-db:${resolved}`);
    }
  }
  if (lines.length === 0) return `the dconf profile ${profile} lists no system database`;
  return await withScratchDir("svc-dconf-read-", async (scratch) => {
    // An empty user database in front, as in a session: without a writable database dconf reports
    // everything as locked.
    await Deno.writeTextFile(`${scratch}/profile`, `user-db:user\n${lines.join("\n")}\n`);
    const env = { DCONF_PROFILE: `${scratch}/profile`, XDG_CONFIG_HOME: scratch, HOME: scratch };
    const dump = await io.runner.run("dconf", ["dump", "/"], { env, timeoutMs: 60_000 });
    if (!dump.success) return `dconf dump failed: ${toolMessage(dump)}`;
    const locks = await io.runner.run("dconf", ["list-locks", "/"], { env, timeoutMs: 60_000 });
    if (!locks.success) return `dconf list-locks failed: ${toolMessage(locks)}`;
    const values = new Map<string, string>();
    let section = "";
    for (const line of dump.stdout.split("\n")) {
      const header = /^\[(.*)\]$/.exec(line);
      if (header) section = header[1] === "/" ? "/" : `/${header[1]}/`;
      else if (line.includes("=")) {
        const eq = line.indexOf("=");
        values.set(`${section}${line.slice(0, eq)}`, line.slice(eq + 1));
      }
    }
    return { values, locks: new Set(locks.stdout.split("\n").map((l) => l.trim()).filter((l) => l)) };
  });
}

/**
 * Compiles the real databases when a file changed or one of `databases` was never compiled; resolves dconf's
 * refusal, if any.
 */
export async function compileDatabases(
  io: EnforcerIO,
  databases: readonly string[],
  changed: readonly string[],
): Promise<string | undefined> {
  let dirty = changed.length > 0;
  for (const db of databases) if (!(await io.fs.exists(`${DCONF_DB_DIR}/${db}`))) dirty = true;
  if (!dirty) return undefined;
  const result = await updateDatabases(io);
  // Without dconf (uninstalled since svc wrote its files) there is no database to recompile.
  const nothingToCompile = result.notFound && databases.length === 0;
  return result.success || nothingToCompile ? undefined : `dconf update failed: ${toolMessage(result)}`;
}

/** `dconf update` of every database under the root. */
export async function updateDatabases(io: EnforcerIO) {
  return await io.runner.run("dconf", ["update", await io.fs.resolve(DCONF_DB_DIR)], { timeoutMs: 120_000 });
}

/** What a session of each of `profiles` reads. */
export async function readSessions(
  io: EnforcerIO,
  profiles: Iterable<string>,
): Promise<Map<string, DconfSession>> {
  const sessions = new Map<string, DconfSession>();
  for (const profile of profiles) sessions.set(profile, await readSession(io, profile));
  return sessions;
}
