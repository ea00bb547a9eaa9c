/**
 * Dconf enforcer: GSettings values for every GNOME session, written as mandatory system defaults.
 *
 * 1. Every policy is re-validated; the names that become paths or keyfile lines are checked a second time.
 * 2. Each entry must fit the schema installed on this node (`dconf/schema_fit.ts`), or it is INAPPLICABLE
 *    (schema or key missing) or ERROR (a value GSettings would silently ignore) for that key alone.
 * 3. Entries merge by priority per (database, dconf path, key): the first policy in the engine's order
 *    (priority descending, then id) wins; the others report that key INAPPLICABLE naming the winner.
 * 4. Per database svc's keyfile and lock list (`dconf/render.ts`); each profile a policy names (default `user`)
 *    gets a `system-db:<db>` line in `/etc/dconf/profile/<profile>` (originals are backed up outside the
 *    directories dconf reads). Before anything is written the keyfile is compiled in a scratch directory, so
 *    dconf's own parser vets it; then the files land and `dconf update` compiles the real database. When that
 *    fails, the previous files are put back (the previous database stays in force), every policy ERROR.
 * 5. Read-back is what a session sees (`dconf/tool.ts`), compared per key by typed value (`uint32 300` equals
 *    `300` read as `u`), locks included.
 *
 * No policy → files of an earlier run are released and the database recompiled. No dconf command while there is
 * something to write → INAPPLICABLE, and svc's files stay (without the command the database they are compiled
 * into cannot be rebuilt without them).
 *
 * A desktop type over `desktop_enforcer.ts`: re-validation, the writing, the put-back and the rollup are the
 * skeleton's (the compile is its transaction, the scratch compile its vet); this module holds dconf's rules.
 *
 * @module
 */

import { checkedContent } from "./revalidate.ts";
import { dconfType } from "../../shared/policy_types/dconf.ts";
import type { DconfPolicy } from "../../shared/gen/svc/policy/v1/dconf_pb.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import { dconfKeyName, dconfPath, gsettingsSchemaId, matches } from "../../shared/policy_types/sanitizers.ts";
import { formatGVariant, gvariantEquals, parseGVariant } from "../../shared/gvariant.ts";
import { scanGSettingsSchemas, type Schema } from "../catalogue.ts";
import type { CachedPolicy, EnforcerIO, ItemResult, PolicyResult } from "../sync/types.ts";
import {
  type Checked,
  desktopEnforcer,
  type DesktopPlan,
  summarize,
  type SummaryWords,
  Winners,
} from "./desktop_enforcer.ts";
import {
  DCONF_DB_DIR,
  DCONF_PROFILE_DIR,
  type DconfKey,
  dconfKeyfilePath,
  dconfLocksPath,
  isSvcDconfFile,
  renderDconfFiles,
  renderProfiles,
} from "./dconf/render.ts";
import {
  compileDatabases,
  type DconfSession,
  precompile,
  readSessions,
  updateDatabases,
} from "./dconf/tool.ts";
import { fitToSchema } from "./dconf/schema_fit.ts";

const NAME = matches(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, "a plain name such as local");

/** One entry of one policy, checked against the node. */
interface Planned extends DconfKey {
  policy: CachedPolicy;
  db: string;
  profile: string;
  schemaId: string;
  /** Item key in reports: the key name, prefixed by the path for relocatable schemas. */
  label: string;
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

/** Checks every entry against the node's schemas and merges those that fit by priority. */
function merge(valid: Checked<DconfPolicy>[], schemas: Map<string, Schema>): Merged {
  const winners = new Winners<Planned>();
  const early = new Map<string, ItemResult[]>();
  for (const { policy, message } of valid) {
    const items: ItemResult[] = [];
    for (const entry of message.entries) {
      const label = entry.path ? `${entry.path}${entry.key}` : entry.key;
      const fit = fitToSchema(entry, schemas);
      if (Array.isArray(fit)) {
        items.push({ schemaId: entry.schemaId, key: label, status: fit[0], message: fit[1] });
        continue;
      }
      const p: Planned = {
        policy,
        db: message.dbName || "local",
        profile: message.profile || "user",
        schemaId: entry.schemaId,
        key: entry.key,
        label,
        ...fit,
        lock: entry.lock,
      };
      winners.add(mergeId(p), p);
    }
    early.set(policy.id, items);
  }
  return { winners, early };
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
  for (const [path, text] of await renderProfiles(io, profiles)) files.set(path, text);
  return { files, settled: merged.early, merged, databases, profiles };
}

/** One policy's keys against the winners and what a session reads. */
function report(
  { policy }: Checked<DconfPolicy>,
  { merged }: DconfPlan,
  sessions: Map<string, DconfSession>,
): Omit<PolicyResult, "policyId"> {
  const items = [...(merged.early.get(policy.id) ?? [])];
  items.push(...merged.winners.itemsOf(policy.id, {
    id: mergeId,
    same: (winner, p) => gvariantEquals(winner.value, p.value) && winner.lock === p.lock,
    applied: (winner) => `${formatGVariant(winner.value)}${winner.lock ? " (locked)" : ""}`,
    item: (p) => ({ schemaId: p.schemaId, key: p.label }),
    judge(_, p) {
      const session = sessions.get(p.profile)!;
      if (typeof session === "string") return ["ERROR", session];
      const path = `${p.dir}${p.key}`;
      const actual = session.values.get(path);
      const want = formatGVariant(p.value);
      if (actual === undefined) {
        return ["NON_COMPLIANT", `expected ${want}, but a session reads no value from the system databases`];
      }
      let equal = false;
      try {
        equal = gvariantEquals(p.value, parseGVariant(actual, p.value.type));
      } catch {
        equal = false;
      }
      if (!equal) return ["NON_COMPLIANT", `expected ${want}, a session reads ${actual}`];
      if (p.lock && !session.locks.has(path)) {
        return ["NON_COMPLIANT", `${want} is in effect but not locked: users can change it`];
      }
      return ["COMPLIANT", `${want}${p.lock ? " (locked)" : ""} is in effect`];
    },
  }));
  return { ...summarize(items, WORDS), items };
}

/** The Dconf enforcer; see the module documentation. */
export const dconfEnforcer = desktopEnforcer({
  type: dconfType.wireName,
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
    activate: (io, plan, { changed }) => compileDatabases(io, [...plan.databases.keys()], changed),
    async reactivate(io) {
      await updateDatabases(io).catch(() => undefined);
    },
    keepsChanges: true,
  },
  readBack: (io, plan) => readSessions(io, plan.profiles.keys()),
  report: (checked, { plan, state }) => report(checked, plan, state),
});
