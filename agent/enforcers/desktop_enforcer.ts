/**
 * One enforcer body for the desktop types (Polkit, Kconfig, Dconf, Firewalld, SessionAccess, Flatpak,
 * DiskEncryption), as `browser_enforcer.ts` is for the browsers. A type declares ({@linkcode DesktopType}) how
 * it re-checks a policy, what the node must have, how the policies merge and render into files, how its tool
 * vets or activates them, what it changes besides files, how it reads the node back and how it reports one
 * policy; this module runs the steps the same way for all:
 *
 * 1. re-validates every policy (`revalidate.ts`: server data is untrusted) — one that fails is ERROR and never
 *    reaches the node;
 * 2. checks what the node must have ({@linkcode NodeNeed}): the first thing missing makes every policy
 *    INAPPLICABLE with that reason, releases svc's files and lets the type forget what it can no longer undo
 *    ({@linkcode Effects.forget}); the same declaration is what the type {@linkcode Enforcer.watches}, so a tool
 *    installed later is enforced at once (agent/sync/node_watch.ts) and the reason and the watch never disagree;
 * 3. nothing to do — no valid policy reaches the node: the type takes back all it did besides files
 *    ({@linkcode Effects.withdraw}), svc's files are released (through the type's tool, when it has a
 *    {@linkcode Transaction}), and the type reports nothing (only the refused policies get their ERROR);
 * 4. plans (the type merges by priority, the first policy in the engine's order winning, see
 *    {@linkcode Winners}, and renders); a plan that cannot be made is ERROR for every policy, nothing touched;
 * 5. lets the type's tool vet the rendered files before anything lands ({@linkcode DesktopType.vet});
 * 6. withdraws what no policy wants any more, then lands the files through `io.writeManaged` (atomic, original
 *    backed up, tamper-watched: the engine's re-sync after a tamper comes through here and writes them back) and
 *    releases the managed files (and stray marked files whose state was lost) no policy wants any more. A type
 *    whose files take effect through a tool ({@linkcode Transaction}: compile, check, reload) lands all or
 *    nothing: when a write or the tool fails every file goes back to what it was and every policy is ERROR with
 *    the tool's words; otherwise a file that cannot be written is reported on the items it carries;
 * 7. applies what is not files ({@linkcode Effects.apply}: a PAM stack entry, remotes and installs, a timer);
 * 8. reads the node back with the type's tool and reports every policy against its own intent
 *    ({@linkcode DesktopType.report}, usually rolled up with {@linkcode summarize}).
 *
 * @module
 */

import {
  type CachedPolicy,
  type ComplianceStatusName,
  type Enforcer,
  type EnforcerIO,
  type ItemResult,
  type PolicyResult,
  rollupMessage,
  rollupStatus,
  type SyncResult,
} from "../sync/types.ts";
import { sha256Hex } from "../sync/managed_files.ts";
import { revalidate } from "./revalidate.ts";

/** Something the node must have for a type to do anything; also what the type watches. */
export interface NodeNeed {
  /** A command the type runs, looked up on PATH; watched at `/usr/bin/<command>` unless `installedAt` says. */
  command?: string;
  /** Node paths where distributions install `command`, watched instead (a tool in `/usr/sbin`, such as cryptsetup). */
  installedAt?: readonly string[];
  /** Node paths of which at least one must exist (be a directory, with `directory`); all are watched. */
  anyOf?: readonly string[];
  directory?: boolean;
  /** Why no policy applies without it, naming what was looked for. */
  missing: string;
  /**
   * Checked only when the plan writes a file, and when missing svc's files stay: the command is needed to undo
   * them as much as to write them (dconf compiles the database they are in).
   */
  toWrite?: boolean;
}

/** Node paths whose appearance or change satisfies `needs`, plus what the type `reads`. */
export function needWatches(needs: readonly NodeNeed[], reads: readonly string[] = []): string[] {
  const paths = needs.flatMap((n) => [
    ...(n.installedAt ?? (n.command ? [`/usr/bin/${n.command}`] : [])),
    ...(n.anyOf ?? []),
  ]);
  return [...new Set([...paths, ...reads])];
}

/** The reason of the first of `needs` the node lacks, or undefined when it has them all. */
export async function missingNeed(io: EnforcerIO, needs: readonly NodeNeed[]): Promise<string | undefined> {
  for (const need of needs) {
    if (need.command && !(await io.runner.which(need.command))) return need.missing;
    if (need.anyOf) {
      let found = false;
      for (const path of need.anyOf) {
        found ||= need.directory ? (await io.fs.stat(path))?.isDirectory === true : await io.fs.exists(path);
      }
      if (!found) return need.missing;
    }
  }
  return undefined;
}

/** Every policy of `valid` reported `status` with `message` (and the items settled for it so far). */
export function resultsForAll(
  valid: readonly { policy: CachedPolicy }[],
  status: ComplianceStatusName,
  message: string,
  settled?: Map<string, ItemResult[]>,
): PolicyResult[] {
  return valid.map(({ policy }) => ({
    policyId: policy.id,
    status,
    message,
    items: settled?.get(policy.id) ?? [],
  }));
}

/**
 * The priority merge every desktop type does: entries are added in the engine's order (priority descending, then
 * policy id), so the first entry of an identity wins; every entry stays listed under its policy for the report.
 */
export class Winners<T extends { policy: CachedPolicy }> {
  readonly #winners = new Map<string, T>();
  readonly #byPolicy = new Map<string, T[]>();

  /** Adds `entry` under identity `id`; true when it wins (no earlier policy named `id`). */
  add(id: string, entry: T): boolean {
    this.#byPolicy.set(entry.policy.id, [...(this.#byPolicy.get(entry.policy.id) ?? []), entry]);
    if (this.#winners.has(id)) return false;
    this.#winners.set(id, entry);
    return true;
  }

  /** The winning entry of identity `id`. */
  winner(id: string): T | undefined {
    return this.#winners.get(id);
  }

  /** Every winning entry, in the order they were added. */
  values(): T[] {
    return [...this.#winners.values()];
  }

  /** The winning identities. */
  ids(): string[] {
    return [...this.#winners.keys()];
  }

  /** The entries policy `policyId` asked for, winners and losers. */
  of(policyId: string): T[] {
    return this.#byPolicy.get(policyId) ?? [];
  }

  /**
   * The report items of policy `policyId`'s entries, the same way for every type: an entry that lost to a
   * different value is INAPPLICABLE naming the winner and the value that applies; one that won (or lost to the
   * same value) is judged against the node by `judge`, given the winning entry and its own.
   */
  itemsOf(policyId: string, how: WinnerReport<T>): ItemResult[] {
    return this.of(policyId).map((entry) => {
      const winner = this.winner(how.id(entry))!;
      const [status, message] = winner !== entry && !how.same?.(winner, entry)
        ? ["INAPPLICABLE" as const, overriddenBy(winner.policy, how.applied?.(winner))]
        : how.judge(winner, entry);
      return { ...how.item(entry), status, message };
    });
  }
}

/** How {@linkcode Winners.itemsOf} reports a type's entries. */
export interface WinnerReport<T> {
  /** The merge identity of an entry (what {@linkcode Winners.add} was given). */
  id(entry: T): string;
  /** Whether a losing entry asked for what the winner applies (then it is judged like the winner); default never. */
  same?(winner: T, entry: T): boolean;
  /** The applied value shown to a loser; default none shown. */
  applied?(winner: T): string;
  /** The item's schema id and key. */
  item(entry: T): { schemaId: string; key: string };
  /** Status and message of an entry in effect as far as the merge goes, against what the node shows. */
  judge(winner: T, entry: T): [ComplianceStatusName, string];
}

/** The message of an entry that lost to `winner`'s, showing the value that applies when there is one to show. */
export function overriddenBy(winner: CachedPolicy, applied?: string): string {
  return `overridden by higher-priority policy "${winner.name}"` +
    (applied ? `; applied value: ${applied}` : "");
}

/** How a type words its policy summaries; see {@linkcode summarize}. */
export interface SummaryWords {
  /** All in effect: `ok` items COMPLIANT, `skipped` INAPPLICABLE (overridden, not for this node). */
  inEffect(ok: number, skipped: number): string;
  /** Every item INAPPLICABLE; default `no <none> applies: <the first three reasons>`. */
  noneApplies?(reasons: string[]): string;
  /** The thing named in the default {@linkcode SummaryWords.noneApplies}, e.g. `setting`. */
  none?: string;
  /** Otherwise (something not in effect): the message; default {@linkcode rollupMessage} with `noun` and `label`. */
  otherwise?(items: readonly ItemResult[]): string;
  /** Default `setting(s)`. */
  noun?: string;
  label?: (item: ItemResult) => string;
}

/**
 * One policy's status and message from its items, in the type's words. A policy with no item at all (it names
 * nothing this node can enforce, such as an empty firewalld zone) is UNKNOWN, worded by the rollup the same way
 * for every type: `0 of 0 <noun> in effect: nothing to enforce`.
 */
export function summarize(
  items: readonly ItemResult[],
  words: SummaryWords,
): { status: ComplianceStatusName; message: string } {
  const status = rollupStatus(items);
  const noun = words.noun ?? "setting(s)";
  if (items.length === 0) return { status, message: rollupMessage(items, noun) };
  if (status === "COMPLIANT") {
    const ok = items.filter((i) => i.status === "COMPLIANT").length;
    return { status, message: words.inEffect(ok, items.length - ok) };
  }
  if (status === "INAPPLICABLE") {
    const reasons = [...new Set(items.map((i) => i.message))];
    return {
      status,
      message: words.noneApplies?.(reasons) ??
        `no ${words.none ?? "setting"} applies: ${reasons.slice(0, 3).join("; ")}`,
    };
  }
  return { status, message: words.otherwise?.(items) ?? rollupMessage(items, noun, words.label) };
}

/**
 * The node's own text of `path` before svc: the backed-up original while svc manages the file (undefined when
 * there was none), otherwise the file as it is unless `isOwn` says it is svc's (its state was lost). Types that
 * render over a node file (a firewalld zone, `firewalld.conf`) start from it, so svc's earlier rendering never
 * becomes the base of the next.
 */
export async function originalText(
  io: EnforcerIO,
  path: string,
  isOwn?: (text: string) => boolean,
): Promise<string | undefined> {
  if (io.managedPaths().includes(path)) {
    // The managed-file store keeps originals under {data_dir}/state/backups/<sha256 of the node path>.
    const backup = `${io.config.enrollment.dataDir}/state/backups/${await sha256Hex(path)}`;
    return await Deno.readTextFile(backup).catch(() => undefined);
  }
  const current = await io.fs.readTextFile(path);
  return current !== undefined && !isOwn?.(current) ? current : undefined;
}

/** A policy that passed re-validation, with what the type's `check` made of it. */
export interface Checked<V> {
  policy: CachedPolicy;
  message: V;
}

/** What a type wants on disk. */
export interface DesktopPlan {
  /** Node path → content of every file svc wants; managed files not listed are released. */
  files: Map<string, string>;
  /** Node path → mode of a file that must not be 0644 (sudoers files are 0440, a unit carrying a script 0600). */
  modes?: ReadonlyMap<string, number>;
  /** Items settled while planning (not for this node, a value that does not fit), per policy id. */
  settled?: Map<string, ItemResult[]>;
}

/** How the files landed. */
export interface Landed {
  /** Node paths whose content changed in this sync. */
  changed: string[];
  /** Node path → why it could not be written (types without a {@linkcode Transaction}). */
  failed: Map<string, string>;
}

/** A type whose files take effect through its tool: they land all together or not at all. */
export interface Transaction<P> {
  /** The files in messages, e.g. `the zone files`. */
  what: string;
  /** After the files landed: the tool takes them (compile, check, reload); resolves its refusal, if any. */
  activate(io: EnforcerIO, plan: P, context: { changed: readonly string[]; policies: number }): Promise<
    string | undefined
  >;
  /** After the previous files are back: the tool takes them again. */
  reactivate(io: EnforcerIO, plan: P): Promise<void>;
  /** Appended to the refusal in every policy's message, e.g. ` (previous files restored)`. */
  note?: string;
  /** Whether the sync reports the files written and restored as changed (the tamper log shows them). */
  keepsChanges?: boolean;
}

/**
 * What a type changes on the node besides its files (a PAM stack entry, remotes and installed software, a
 * timer). The skeleton calls it at fixed points, so taking back always comes before the files it depends on go,
 * and applying after the files it needs are there.
 */
export interface Effects<P> {
  /**
   * Before the skeleton releases `unwanted` (managed files no policy wants any more): takes back what depends on
   * them and what no policy of `wanted` asks for; `wanted` undefined means nothing is to do, so everything the type
   * did goes. Paths it changes on the way go into `changed`. Resolves the paths that must stay managed for now
   * (taking back what depends on them failed, and releasing them would not be safe), if any.
   */
  withdraw(
    io: EnforcerIO,
    wanted: P | undefined,
    context: { unwanted: readonly string[]; changed: string[] },
  ): Promise<readonly string[] | void>;
  /** After the files landed: brings the other effects in line with `plan`, recording outcomes in it for the report. */
  apply(io: EnforcerIO, plan: P, landed: Landed): Promise<void>;
  /** The node lost what the type needs (a {@linkcode NodeNeed}): forgets what svc can no longer take back. */
  forget?(io: EnforcerIO): Promise<void>;
}

/** What a desktop type declares; see the module documentation. */
export interface DesktopType<V, P extends DesktopPlan, S> {
  /** Wire name. */
  type: string;
  notifiesUsers: boolean;
  /**
   * The shared registry's checks of one policy plus the type's own (names that become paths, a rendered script);
   * throws `PolicyContentError` naming the problem.
   */
  check(policy: CachedPolicy): V;
  /** What the node must have, in the order they are checked. */
  needs: readonly NodeNeed[];
  /** Other node paths whose change changes what the type does (schemas, accounts, the read-back tool). */
  reads?: readonly string[];
  /** Whether `text` found at `path` is svc's own (not an original to back up); default never. */
  isOwnContent?(text: string, path: string): boolean;
  /**
   * Managed files that stay, as they are, when no policy of the type is left, because another type relies on
   * them (the Proxy type's line in a dconf profile that a Dconf policy's database also needs). Only files the type
   * manages count; everything else it did still goes.
   */
  kept?(io: EnforcerIO): Promise<Map<string, string>>;
  /** Files in `dir` ending in `suffix` that carry svc's mark but no state entry (state lost): removed when unwanted. */
  strays?: { dir: string; suffix: string };
  /**
   * Merges and renders the valid policies; a string is why no plan can be made (every policy ERROR). Called with
   * no policy too, for what a {@linkcode Transaction} needs to take svc's files back; the files of that plan are
   * never written.
   */
  plan(valid: Checked<V>[], io: EnforcerIO): Promise<P | string>;
  /** The type's tool judges the rendered files before any lands; resolves its refusal, if any. */
  vet?(io: EnforcerIO, plan: P): Promise<string | undefined>;
  transaction?: Transaction<P>;
  /** What the type changes besides its files. */
  effects?: Effects<P>;
  /** Reads back what the node's programs see. */
  readBack(io: EnforcerIO, plan: P, landed: Landed): Promise<S>;
  /** One policy's items, status and message. */
  report(checked: Checked<V>, context: { plan: P; state: S; landed: Landed }): Omit<PolicyResult, "policyId">;
}

/** Marks what {@linkcode desktopEnforcer} builds; a spread copy (a type adding traits) keeps it. */
const BUILT_BY_SKELETON = Symbol("desktop skeleton");

/** Whether `enforcer` runs the skeleton's steps (built by {@linkcode desktopEnforcer}, or a spread copy of one). */
export function isDesktopEnforcer(enforcer: Enforcer): boolean {
  return (enforcer as { [BUILT_BY_SKELETON]?: boolean })[BUILT_BY_SKELETON] === true;
}

/** Builds the enforcer of a desktop type; see the module documentation. */
export function desktopEnforcer<V, P extends DesktopPlan, S>(def: DesktopType<V, P, S>): Enforcer {
  const ownContent = (path: string) => (text: string) => def.isOwnContent?.(text, path) === true;
  const enforcer: Enforcer = {
    type: def.type,
    notifiesUsers: def.notifiesUsers,
    watches: () => needWatches(def.needs, def.reads),

    async sync(policies: CachedPolicy[], io: EnforcerIO): Promise<SyncResult> {
      const { valid, rejected } = revalidate(def.type, policies, { check: def.check, logger: io.logger });
      const results: PolicyResult[] = rejected;
      const landed: Landed = { changed: [], failed: new Map() };
      const done = () => ({ policies: results, changed: landed.changed });

      const missing = await missingNeed(io, def.needs.filter((n) => !n.toWrite));
      if (missing) {
        await def.effects?.forget?.(io);
        await land(io, new Map(), landed, {});
        results.push(...resultsForAll(valid, "INAPPLICABLE", missing));
        return done();
      }
      if (valid.length === 0) {
        await nothingToDo(io, landed);
        return done();
      }
      const plan = await def.plan(valid, io);
      if (typeof plan === "string") {
        results.push(...resultsForAll(valid, "ERROR", plan));
        return done();
      }
      if (plan.files.size > 0) {
        const absent = await missingNeed(io, def.needs.filter((n) => n.toWrite));
        if (absent) {
          results.push(...resultsForAll(valid, "INAPPLICABLE", absent));
          return done();
        }
      }
      const refused = await def.vet?.(io, plan);
      if (refused) {
        results.push(...resultsForAll(valid, "ERROR", refused, plan.settled));
        return done();
      }
      const failure = await land(io, plan.files, landed, { plan, wanted: plan, policies: valid.length });
      if (failure) {
        results.push(...resultsForAll(valid, "ERROR", failure, plan.settled));
        return done();
      }
      await def.effects?.apply(io, plan, landed);
      const state = await def.readBack(io, plan, landed);
      for (const checked of valid) {
        results.push({ policyId: checked.policy.id, ...def.report(checked, { plan, state, landed }) });
      }
      return done();
    },
  };
  return Object.assign(enforcer, { [BUILT_BY_SKELETON]: true });

  /**
   * No valid policy: everything the type did goes, the same way for every type. The plan of no policy only
   * carries what the tool needs to take the files back; nothing of it is written.
   */
  async function nothingToDo(io: EnforcerIO, landed: Landed): Promise<void> {
    const empty = def.transaction ? await def.plan([], io) : undefined;
    const kept = new Map<string, string>();
    const managed = new Set(io.managedPaths());
    for (const [path, text] of (await def.kept?.(io)) ?? []) if (managed.has(path)) kept.set(path, text);
    const failure = await land(io, kept, landed, {
      plan: typeof empty === "string" ? undefined : empty,
      withdraw: true,
      policies: 0,
    });
    if (failure) io.logger.error(`${def.type}: svc's files could not be taken back`, { error: failure });
  }

  /**
   * Withdraws the type's other effects (when `withdraw` or a `wanted` plan is given), releases what is not in
   * `files`, writes `files`; with a transaction (and its `plan`), activates them and on failure puts every touched
   * file back. Resolves the failure message of a transaction that was rolled back.
   */
  async function land(
    io: EnforcerIO,
    files: Map<string, string>,
    landed: Landed,
    context: { plan?: P; wanted?: P; withdraw?: boolean; policies?: number },
  ): Promise<string | undefined> {
    const { changed } = landed;
    const tx = context.plan && def.transaction;
    const managed = new Set(io.managedPaths());
    const unwanted = [...managed].filter((path) => !files.has(path));
    const keep = new Set(
      def.effects && (context.wanted || context.withdraw)
        ? await def.effects.withdraw(io, context.wanted, { unwanted, changed }) ?? []
        : [],
    );
    const before = new Map<string, string | undefined>();
    const touched: string[] = [];
    const touch = async (path: string) => {
      if (tx) before.set(path, managed.has(path) ? await io.fs.readTextFile(path) : undefined);
      touched.push(path);
    };
    let failure: string | undefined;
    try {
      for (const path of unwanted) {
        if (keep.has(path)) continue;
        await touch(path);
        if (await io.releaseManaged(path)) changed.push(path);
      }
      if (def.strays) await removeStrays(io, files, changed);
      for (const [path, content] of files) {
        await touch(path);
        try {
          const mode = context.plan?.modes?.get(path) ?? 0o644;
          if (await io.writeManaged(path, content, { mode, isOwnContent: ownContent(path) })) {
            changed.push(path);
          }
        } catch (err) {
          if (tx) throw err;
          landed.failed.set(path, `cannot write ${path}: ${(err as Error).message}`);
        }
      }
      if (tx) failure = await tx.activate(io, context.plan!, { changed, policies: context.policies ?? 0 });
    } catch (err) {
      if (!tx) throw err;
      failure = `cannot write ${tx.what}: ${(err as Error).message}`;
    }
    if (!tx || !failure) return undefined;

    io.logger.error(`${def.type} files rolled back`, { error: failure });
    for (const path of touched.reverse()) {
      const text = before.get(path);
      try {
        if (!managed.has(path)) await io.releaseManaged(path);
        else if (text !== undefined) {
          const mode = context.plan?.modes?.get(path) ?? 0o644;
          await io.writeManaged(path, text, { mode, isOwnContent: ownContent(path) });
        }
      } catch (err) {
        io.logger.error(`cannot restore a ${def.type} file`, { path, error: (err as Error).message });
      }
    }
    if (!tx.keepsChanges) changed.length = 0;
    await tx.reactivate(io, context.plan!);
    return `${failure}${tx.note ?? ""}`;
  }

  /** Removes files carrying svc's mark in the type's `strays` directory that no plan wants (their state was lost). */
  async function removeStrays(io: EnforcerIO, files: Map<string, string>, changed: string[]): Promise<void> {
    const { dir, suffix } = def.strays!;
    for (const name of await io.fs.readDir(dir)) {
      const path = `${dir}/${name}`;
      if (files.has(path) || !name.endsWith(suffix)) continue;
      const text = await io.fs.readTextFile(path).catch(() => undefined);
      if (text !== undefined && def.isOwnContent?.(text, path) && await io.fs.remove(path)) {
        changed.push(path);
      }
    }
  }
}
