/**
 * Dconf enforcer: GSettings values for every GNOME session, written as mandatory system defaults.
 *
 * 1. Every policy is parsed and validated again with the shared registry (server data is untrusted); a
 *    policy that fails is reported ERROR and none of its entries reaches a file.
 * 2. Each entry is checked against the schema installed on this node (the agent's own scan of
 *    `/usr/share/glib-2.0/schemas`): a schema that is not installed, or a key it does not have, is
 *    INAPPLICABLE; a value is typed with the key's GVariant type (shared `gvariant.ts`: `300` for a `u`
 *    key is written `uint32 300`, which GSettings needs) and checked against the key's enum, flags,
 *    choices and range, because GSettings silently ignores a dconf value that does not fit. The dconf
 *    path is the schema's own (not the id with dots turned into slashes), or the entry's path for a
 *    relocatable schema.
 * 3. Entries merge by priority per (database, dconf path, key): the first policy in the engine's order
 *    (priority descending, then id) wins; the others report that key INAPPLICABLE naming the winner.
 * 4. Per database one keyfile `/etc/dconf/db/<db>.d/svc-policies` and one lock list
 *    `/etc/dconf/db/<db>.d/locks/svc-policies` (dconf lets a later keyfile in name order win, so svc's file
 *    comes after the usual `00-name` ones; a local file sorting later is caught by the read-back); each
 *    profile a policy names (default `user`) gets a `system-db:<db>` line in `/etc/dconf/profile/<profile>`
 *    (originals are backed up by the managed-file store, outside the directories dconf reads). Before anything is written, the rendered keyfile is
 *    compiled with `dconf compile` in a scratch directory, so dconf's own parser vets it; then the files
 *    are written and `dconf update <root>/etc/dconf/db` compiles the real database. When that fails, the
 *    previous files are put back (the previous compiled database stays in force) and the policies
 *    report ERROR with dconf's message.
 * 5. Read-back is what a session sees: a dconf profile made from the node's profile with every
 *    `system-db:` turned into a `file-db:` under the root, read with `dconf dump /` and
 *    `dconf list-locks /`, compared per key by typed value (`uint32 300` equals `300` read as `u`), locks
 *    included.
 *
 * No policy → nothing is written; files of an earlier run are released and the database recompiled. No dconf
 * command while there is something to write → INAPPLICABLE, and svc's files stay (without the command the
 * database they are compiled into cannot be rebuilt without them).
 *
 * A desktop type over `desktop_enforcer.ts`: steps 1, the writing, the put-back and the rollup are the skeleton's
 * (the compile is its transaction, the scratch compile its vet); this module holds steps 2 to 5's dconf rules.
 *
 * @module
 */

import { checkedContent } from "./revalidate.ts";
import { dconfType } from "../../shared/policy_types/dconf.ts";
import type { DconfPolicy } from "../../shared/gen/svc/policy/v1/dconf_pb.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import { dconfKeyName, dconfPath, gsettingsSchemaId, matches } from "../../shared/policy_types/sanitizers.ts";
import {
  formatGVariant,
  type GValue,
  gvariantEquals,
  GVariantError,
  gvariantNumber,
  parseGVariant,
} from "../../shared/gvariant.ts";
import { scanGSettingsSchemas, type Schema, type SchemaKey } from "../catalogue.ts";
import type {
  CachedPolicy,
  ComplianceStatusName,
  EnforcerIO,
  ItemResult,
  PolicyResult,
} from "../sync/types.ts";
import {
  type Checked,
  desktopEnforcer,
  type DesktopPlan,
  overriddenBy,
  summarize,
  type SummaryWords,
  Winners,
} from "./desktop_enforcer.ts";

/** Directory of the system databases (node path). */
export const DCONF_DB_DIR = "/etc/dconf/db";
/** Directory of the dconf profiles (node path). */
export const DCONF_PROFILE_DIR = "/etc/dconf/profile";
/** Name of svc's keyfile and lock list inside `<db>.d/` and `<db>.d/locks/`. */
export const DCONF_FILE_NAME = "svc-policies";
const HEADER =
  "# Managed by svc (svc-agent). Local changes are overwritten; change the Dconf policy instead.";
const NAME = matches(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, "a plain name such as local");

/** Node path of svc's keyfile in database `db`. */
export function dconfKeyfilePath(db: string): string {
  return `${DCONF_DB_DIR}/${db}.d/${DCONF_FILE_NAME}`;
}

/** Node path of svc's lock list in database `db`. */
export function dconfLocksPath(db: string): string {
  return `${DCONF_DB_DIR}/${db}.d/locks/${DCONF_FILE_NAME}`;
}

/** One entry of one policy, checked against the node (also what the Proxy type renders for GNOME). */
export interface Planned {
  policy: CachedPolicy;
  db: string;
  profile: string;
  schemaId: string;
  key: string;
  /** Item key in reports: the key name, prefixed by the path for relocatable schemas. */
  label: string;
  /** dconf directory, with leading and trailing `/`. */
  dir: string;
  value: GValue;
  lock: boolean;
}

/** The entries that won per (database, path, key), and the items settled while checking them against the node. */
interface Merged {
  winners: Winners<Planned>;
  /** Items decided before the write (INAPPLICABLE, ERROR), per policy id. */
  early: Map<string, ItemResult[]>;
}

function mergeId(p: { db: string; dir: string; key: string }): string {
  return `${p.db}\u0000${p.dir}${p.key}`;
}

/**
 * Parses and validates a cached policy again, and checks every name that becomes part of a path or a
 * keyfile line a second time with the same checkers.
 *
 * @throws {PolicyContentError} naming the problem.
 */
export function dconfPolicyContent(policy: CachedPolicy): DconfPolicy {
  const message = checkedContent(policy, dconfType);
  for (
    const [field, value, check] of [
      ["db_name", message.dbName || "local", NAME],
      ["profile", message.profile || "user", NAME],
    ] as const
  ) {
    const problem = check(value);
    if (problem) throw new PolicyContentError(`${field}: ${problem}`);
  }
  for (const [i, e] of message.entries.entries()) {
    const problem = gsettingsSchemaId(e.schemaId) ?? dconfKeyName(e.key) ??
      (e.path ? dconfPath(e.path) : undefined);
    if (problem) throw new PolicyContentError(`entries[${i}]: ${problem}`);
  }
  return message;
}

function inRange(value: GValue, key: SchemaKey): string | undefined {
  const n = gvariantNumber(value);
  if (n === undefined) return undefined;
  const bound = (text: string) => {
    if (!text) return undefined;
    try {
      return gvariantNumber(parseGVariant(text, key.type));
    } catch {
      return undefined;
    }
  };
  const min = bound(key.rangeMin);
  const max = bound(key.rangeMax);
  if ((min !== undefined && n < min) || (max !== undefined && n > max)) {
    return `${formatGVariant(value)} is outside the key's range ${key.rangeMin} to ${key.rangeMax}`;
  }
  return undefined;
}

/** Checks a typed value against the key's enum, flags and choices; undefined when fine. */
function allowed(value: GValue, key: SchemaKey): string | undefined {
  const nicks = key.enumValues.map((e) => e.nick);
  if (key.flags) {
    const bad = (value.value as GValue[]).map((v) => v.value as string).filter((v) => !nicks.includes(v));
    return bad.length
      ? `${bad.map((b) => `'${b}'`).join(", ")} not among the flags ${nicks.join(", ")}`
      : undefined;
  }
  if (nicks.length && !nicks.includes(value.value as string)) {
    return `must be one of ${nicks.map((n) => `'${n}'`).join(", ")}`;
  }
  if (key.choices.length && value.type === "s" && !key.choices.includes(value.value as string)) {
    return `must be one of ${key.choices.map((n) => `'${n}'`).join(", ")}`;
  }
  return inRange(value, key);
}

function merge(
  valid: { policy: CachedPolicy; message: DconfPolicy }[],
  schemas: Map<string, Schema>,
): Merged {
  const winners = new Winners<Planned>();
  const early = new Map<string, ItemResult[]>();
  for (const { policy, message } of valid) {
    const items: ItemResult[] = [];
    for (const entry of message.entries) {
      const label = entry.path ? `${entry.path}${entry.key}` : entry.key;
      const item = (status: ComplianceStatusName, text: string) =>
        items.push({ schemaId: entry.schemaId, key: label, status, message: text });
      const schema = schemas.get(entry.schemaId);
      if (!schema) {
        item("INAPPLICABLE", `schema ${entry.schemaId} is not installed on this node`);
        continue;
      }
      let dir = schema.path;
      if (schema.relocatable) {
        if (!entry.path) {
          item(
            "ERROR",
            `schema ${entry.schemaId} is relocatable: give the dconf path of the instance to set`,
          );
          continue;
        }
        dir = entry.path;
      } else if (entry.path && entry.path !== schema.path) {
        item("ERROR", `schema ${entry.schemaId} has the fixed path ${schema.path}: leave the path empty`);
        continue;
      }
      const key = schema.keys.find((k) => k.name === entry.key);
      if (!key) {
        item("INAPPLICABLE", `schema ${entry.schemaId} on this node has no key ${entry.key}`);
        continue;
      }
      let value: GValue;
      try {
        value = parseGVariant(entry.value, key.type || undefined);
      } catch (err) {
        if (!(err instanceof GVariantError)) throw err;
        item("ERROR", `value ${entry.value} does not fit the key's type ${key.type}: ${err.message}`);
        continue;
      }
      const problem = allowed(value, key);
      if (problem) {
        item("ERROR", `value ${entry.value} ${problem}`);
        continue;
      }
      const p: Planned = {
        policy,
        db: message.dbName || "local",
        profile: message.profile || "user",
        schemaId: entry.schemaId,
        key: entry.key,
        label,
        dir,
        value,
        lock: entry.lock,
      };
      winners.add(mergeId(p), p);
    }
    early.set(policy.id, items);
  }
  return { winners, early };
}

/** Renders the keyfile and lock list of one database; sections and keys sorted. */
export function renderDconfFiles(entries: readonly Planned[]): { keyfile: string; locks: string } {
  const byDir = new Map<string, Planned[]>();
  for (const e of entries) byDir.set(e.dir, [...(byDir.get(e.dir) ?? []), e]);
  const dirs = [...byDir.keys()].sort();
  const sections = dirs.map((dir) => {
    const lines = byDir.get(dir)!.sort((a, b) => (a.key < b.key ? -1 : 1)).map((e) =>
      `${e.key}=${formatGVariant(e.value)}`
    );
    return `[${dir.slice(1, -1)}]\n${lines.join("\n")}\n`;
  });
  const locks = entries.filter((e) => e.lock).map((e) => `${e.dir}${e.key}`).sort();
  return {
    keyfile: `${HEADER}\n\n${sections.join("\n")}`,
    locks: `${HEADER}\n${locks.map((l) => `${l}\n`).join("")}`,
  };
}

/** Whether text is a file svc wrote (keyfile, lock list). */
export function isSvcDconfFile(text: string): boolean {
  return text.startsWith(HEADER);
}

/** GDM's read-only greeter defaults, which a `gdm` profile svc creates keeps after its own database. */
export const GDM_GREETER_DEFAULTS = "/usr/share/gdm/greeter-dconf-defaults";

/**
 * The profile text with `system-db:<db>` right after the user database line (or first); undefined when it is
 * listed already. A new profile is `user-db:user` + the database, plus `fallback` lines (a new `gdm` profile
 * keeps GDM's greeter defaults).
 */
export function profileWith(
  current: string | undefined,
  db: string,
  fallback: readonly string[] = [],
): string | undefined {
  const lines = (current ?? "").split("\n").map((l) => l.trim()).filter((l) => l !== "");
  if (lines.includes(`system-db:${db}`)) return undefined;
  if (lines.length === 0) {
    return [`user-db:user`, `system-db:${db}`, ...fallback].map((l) => `${l}\n`).join("");
  }
  const userAt = lines.findIndex((l) => l.startsWith("user-db:"));
  lines.splice(userAt + 1, 0, `system-db:${db}`);
  return `${lines.join("\n")}\n`;
}

function toolMessage(result: { stderr: string; stdout: string; code: number }): string {
  const text = `${result.stderr}\n${result.stdout}`.trim().replace(/\s+/g, " ");
  return text ? text.slice(0, 1000) : `exit code ${result.code}`;
}

/** Compiles the keyfile of one database in a scratch directory; undefined when dconf accepts it. */
export async function precompile(
  io: EnforcerIO,
  keyfile: string,
  locks: string,
): Promise<string | undefined> {
  const scratch = await Deno.makeTempDir({ prefix: "svc-dconf-" });
  try {
    await Deno.mkdir(`${scratch}/db.d/locks`, { recursive: true });
    await Deno.writeTextFile(`${scratch}/db.d/${DCONF_FILE_NAME}`, keyfile);
    await Deno.writeTextFile(`${scratch}/db.d/locks/${DCONF_FILE_NAME}`, locks);
    const result = await io.runner.run("dconf", ["compile", `${scratch}/db`, `${scratch}/db.d`], {
      timeoutMs: 60_000,
    });
    return result.success ? undefined : toolMessage(result);
  } finally {
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
  }
}

/** Reads what a session sees: `dconf dump /` and `dconf list-locks /` through a profile under the root. */
export async function readSession(
  io: EnforcerIO,
  profile: string,
): Promise<{ values: Map<string, string>; locks: Set<string> } | string> {
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
  const scratch = await Deno.makeTempDir({ prefix: "svc-dconf-read-" });
  try {
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
  } finally {
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
  }
}

const WORDS: SummaryWords = {
  inEffect: (ok, skipped) =>
    `${ok} GSettings key(s) in effect` + (skipped ? `; ${skipped} not applicable` : ""),
  none: "key",
  noun: "key(s)",
  label: (i) => `${i.schemaId} ${i.key}`,
};

/** What the Dconf type lands: per database its keyfile and lock list, per profile its text. */
interface DconfPlan extends DesktopPlan {
  merged: Merged;
  databases: Map<string, { keyfile: string; locks: string }>;
  /** Profile → the databases it must list. */
  profiles: Map<string, Set<string>>;
}

async function planFiles(valid: Checked<DconfPolicy>[], io: EnforcerIO): Promise<DconfPlan> {
  const schemas = new Map(
    (valid.length ? await scanGSettingsSchemas(io.fs) ?? [] : []).map((s) => [s.schemaId, s]),
  );
  const merged = merge(valid, schemas);
  const byDb = new Map<string, Planned[]>();
  const profiles = new Map<string, Set<string>>();
  for (const w of merged.winners.values()) {
    byDb.set(w.db, [...(byDb.get(w.db) ?? []), w]);
    profiles.set(w.profile, (profiles.get(w.profile) ?? new Set()).add(w.db));
  }
  const files = new Map<string, string>();
  const databases = new Map<string, { keyfile: string; locks: string }>();
  for (const [db, entries] of [...byDb].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const rendered = renderDconfFiles(entries);
    databases.set(db, rendered);
    files.set(dconfKeyfilePath(db), rendered.keyfile);
    files.set(dconfLocksPath(db), rendered.locks);
  }
  const managed = io.managedPaths();
  for (const [profile, dbs] of profiles) {
    const path = `${DCONF_PROFILE_DIR}/${profile}`;
    const text = await io.fs.readTextFile(path);
    let next = text;
    const fallback = profile === "gdm" && await io.fs.exists(GDM_GREETER_DEFAULTS)
      ? [`file-db:${GDM_GREETER_DEFAULTS}`]
      : [];
    for (const db of [...dbs].sort()) next = profileWith(next, db, fallback) ?? next;
    if (next !== undefined && (next !== text || managed.includes(path))) files.set(path, next);
  }
  return { files, settled: merged.early, merged, databases, profiles };
}

/** Compiles the real databases when a file changed or a database was never compiled. */
export async function compile(
  io: EnforcerIO,
  plan: Pick<DconfPlan, "databases">,
  changed: readonly string[],
): Promise<string | undefined> {
  let dirty = changed.length > 0;
  for (const db of plan.databases.keys()) if (!(await io.fs.exists(`${DCONF_DB_DIR}/${db}`))) dirty = true;
  if (!dirty) return undefined;
  const result = await io.runner.run("dconf", ["update", await io.fs.resolve(DCONF_DB_DIR)], {
    timeoutMs: 120_000,
  });
  // Without dconf (uninstalled since svc wrote its files) there is no database to recompile.
  const nothingToCompile = result.notFound && plan.databases.size === 0;
  return result.success || nothingToCompile ? undefined : `dconf update failed: ${toolMessage(result)}`;
}

/** One policy's keys against the winners and what a session reads. */
function report(
  { policy }: Checked<DconfPolicy>,
  { merged }: DconfPlan,
  sessions: Map<string, Awaited<ReturnType<typeof readSession>>>,
): Omit<PolicyResult, "policyId"> {
  const items = [...(merged.early.get(policy.id) ?? [])];
  for (const p of merged.winners.of(policy.id)) {
    const winner = merged.winners.winner(mergeId(p))!;
    const item = (status: ComplianceStatusName, message: string) =>
      items.push({ schemaId: p.schemaId, key: p.label, status, message });
    if (winner !== p && !(gvariantEquals(winner.value, p.value) && winner.lock === p.lock)) {
      item(
        "INAPPLICABLE",
        overriddenBy(winner.policy, `${formatGVariant(winner.value)}${winner.lock ? " (locked)" : ""}`),
      );
      continue;
    }
    const session = sessions.get(p.profile)!;
    if (typeof session === "string") {
      item("ERROR", session);
      continue;
    }
    const path = `${p.dir}${p.key}`;
    const actual = session.values.get(path);
    const want = formatGVariant(p.value);
    if (actual === undefined) {
      item("NON_COMPLIANT", `expected ${want}, but a session reads no value from the system databases`);
      continue;
    }
    let equal = false;
    try {
      equal = gvariantEquals(p.value, parseGVariant(actual, p.value.type));
    } catch {
      equal = false;
    }
    if (!equal) {
      item("NON_COMPLIANT", `expected ${want}, a session reads ${actual}`);
    } else if (p.lock && !session.locks.has(path)) {
      item("NON_COMPLIANT", `${want} is in effect but not locked: users can change it`);
    } else {
      item("COMPLIANT", `${want}${p.lock ? " (locked)" : ""} is in effect`);
    }
  }
  return { ...summarize(items, WORDS), items };
}

/** The Dconf enforcer; see the module documentation. */
export const dconfEnforcer = desktopEnforcer({
  type: "Dconf",
  notifiesUsers: false,
  check: dconfPolicyContent,
  needs: [{
    command: "dconf",
    toWrite: true,
    missing: "dconf is not installed on this node (no dconf command)",
  }],
  // Schemas installed later make keys applicable; profiles edited later decide which databases a session reads.
  reads: ["/usr/share/glib-2.0/schemas", DCONF_PROFILE_DIR],
  // Profiles are shared with the node (never recognised as svc's); keyfiles and lock lists carry the header.
  isOwnContent: (text, path) => path.startsWith(DCONF_DB_DIR) && isSvcDconfFile(text),
  plan: planFiles,
  async vet(io, plan) {
    for (const [db, { keyfile, locks }] of plan.databases) {
      const problem = await precompile(io, keyfile, locks);
      if (problem) return `dconf refused the keyfile for database ${db}: ${problem}`;
    }
    return undefined;
  },
  transaction: {
    what: "the dconf files",
    activate: (io, plan, { changed }) => compile(io, plan, changed),
    async reactivate(io) {
      await io.runner.run("dconf", ["update", await io.fs.resolve(DCONF_DB_DIR)], { timeoutMs: 120_000 })
        .catch(() => undefined);
    },
    keepsChanges: true,
  },
  async readBack(io, plan) {
    const sessions = new Map<string, Awaited<ReturnType<typeof readSession>>>();
    for (const profile of plan.profiles.keys()) sessions.set(profile, await readSession(io, profile));
    return sessions;
  },
  report: (checked, { plan, state }) => report(checked, plan, state),
});
