/**
 * Flatpak: system-wide remotes and applications, applied with the real `flatpak` command.
 *
 * 1. Every policy is re-validated with the shared registry (server data is untrusted); a policy that
 *    fails is reported ERROR and changes nothing.
 * 2. Policies merge by priority: remotes by name, applications by app id; the first (highest
 *    priority, then smallest id) wins, and a losing entry is reported INAPPLICABLE naming the winner.
 * 3. Remotes: the signing key (ASCII-armoured) and the filter live in managed files under
 *    `/etc/svc/flatpak/`, so they are tamper-watched and removed with the policy. A remote of the same
 *    name that svc did not add is adopted (modified in place, its previous settings recorded and put back
 *    when no policy names it any more), never duplicated. Subsets need a `flatpak` that knows
 *    `--subset`; an older one reports the remote NON_COMPLIANT.
 * 4. Applications: PRESENT installs when missing, LATEST installs or updates, ABSENT uninstalls
 *    (optionally with the user data). Every ref that appears during an install svc made (the app and
 *    the runtimes it pulled) is recorded in `{data_dir}/state/flatpak.json`; refs svc installed and no
 *    policy wants any more are uninstalled, then remotes svc added are deleted. Nothing svc did not add
 *    is removed (a remote still used by software installed by someone else stays).
 * 5. Everything is read back (`flatpak remotes`, `flatpak list`) and reported per remote and per app.
 * 6. Between syncs, the installed PRESENT and LATEST apps are updated every `update_interval_hours`
 *    (the highest-priority policy that sets it; {@linkcode DEFAULT_UPDATE_INTERVAL_HOURS} otherwise),
 *    never at the same time as a sync.
 *
 * The type runs in the engine's background lane (downloads take long). The installation targeted is
 * the system one, which `FLATPAK_SYSTEM_DIR` in the agent's environment (or {@linkcode
 * FlatpakEnforcerOptions.env}) can move. No `flatpak` on the node → every policy INAPPLICABLE.
 *
 * Of `desktop_enforcer.ts` it uses what fits a type whose effects are commands, not files: what the node must
 * have (the INAPPLICABLE reason and the watch from one {@linkcode NodeNeed}) and the loser's message. The
 * skeleton's landing does not fit: remotes and apps are changed by `flatpak` commands one at a time, with a
 * state file of what svc added and no rollback, so steps 2 to 6 stay here.
 *
 * @module
 */

import {
  type FlatpakApp,
  FlatpakAppState,
  type FlatpakRemote,
} from "../../shared/gen/svc/policy/v1/flatpak_pb.ts";
import { flatpakType } from "../../shared/policy_types/flatpak.ts";
import { readFileIfExists, writeFileAtomic } from "../fs.ts";
import { FLATPAK_STATE_FILE, flatpakStatePath } from "./state_file.ts";
import type { RunResult } from "../runner.ts";
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
import { checkedContent, revalidate } from "./revalidate.ts";
import { missingNeed, needWatches, type NodeNeed, overriddenBy, resultsForAll } from "./desktop_enforcer.ts";

/** What the node must have (the reason when it lacks it, and what is watched for it). */
const NEEDS: NodeNeed[] = [{ command: "flatpak", missing: "flatpak is not installed on this node" }];

/** Node directory of the key and filter files svc writes. */
export const FLATPAK_FILES_DIR = "/etc/svc/flatpak";

/** Options of {@linkcode createFlatpakEnforcer}. */
export interface FlatpakEnforcerOptions {
  /** Variables for every `flatpak` command, e.g. `FLATPAK_SYSTEM_DIR` (tests use a temp dir). */
  env?: Record<string, string>;
  /** Milliseconds one install or update may take; default 30 minutes. */
  transferTimeoutMs?: number;
  /** Milliseconds in an hour of `update_interval_hours` (tests shorten it); default 3 600 000. */
  hourMs?: number;
}

/** Hours between two periodic updates when no policy sets `update_interval_hours`. */
export const DEFAULT_UPDATE_INTERVAL_HOURS = 24;

/** A remote's settings as svc records them when adopting one. */
interface RemoteSettings {
  url: string;
  priority: string;
  filter: string;
  subset: string;
  title: string;
}

/** What svc added to the installation, in `{data_dir}/state/flatpak.json`. */
interface FlatpakState {
  version: 1;
  /** Remote name → added by svc, or adopted with its previous settings. */
  remotes: Record<string, { added: true } | { added: false; original: RemoteSettings }>;
  /** Full refs (`app/…`, `runtime/…`) that appeared during installs svc made. */
  refs: string[];
}

interface InstalledRef {
  ref: string;
  kind: string;
  id: string;
  branch: string;
  origin: string;
  commit: string;
}

interface Owned<T> {
  policy: CachedPolicy;
  value: T;
}

const CHECKED_COLUMNS = "name,url,priority,filter,subset,title";
const LIST_COLUMNS = "application,arch,branch,origin,active";

async function loadState(io: EnforcerIO): Promise<FlatpakState> {
  const bytes = await readFileIfExists(flatpakStatePath(io));
  if (!bytes) return { version: 1, remotes: {}, refs: [] };
  try {
    const parsed = JSON.parse(new TextDecoder().decode(bytes)) as FlatpakState;
    if (parsed.version !== 1 || typeof parsed.remotes !== "object" || !Array.isArray(parsed.refs)) {
      throw new Error("unknown layout");
    }
    return parsed;
  } catch (err) {
    io.logger.error("Flatpak state is unreadable; svc forgets what it added", {
      file: flatpakStatePath(io),
      error: (err as Error).message,
    });
    return { version: 1, remotes: {}, refs: [] };
  }
}

async function saveState(io: EnforcerIO, state: FlatpakState): Promise<void> {
  state.refs = [...new Set(state.refs)].sort();
  await writeFileAtomic(flatpakStatePath(io), `${JSON.stringify(state, null, 2)}\n`, {
    mode: 0o600,
    dirMode: 0o700,
  });
}

function isEmptyState(state: FlatpakState): boolean {
  return Object.keys(state.remotes).length === 0 && state.refs.length === 0;
}

/** One value of a `--columns` table; flatpak prints "-" for an unset one. */
function cell(value: string | undefined): string {
  const v = (value ?? "").trim();
  return v === "-" ? "" : v;
}

/** Parses `flatpak remotes --columns=name,url,priority,filter,subset,title`. */
export function parseRemotes(text: string): Map<string, RemoteSettings> {
  const remotes = new Map<string, RemoteSettings>();
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const [name, url, priority, filter, subset, title] = line.split("\t");
    if (!cell(name)) continue;
    remotes.set(cell(name), {
      url: cell(url),
      priority: cell(priority),
      filter: cell(filter),
      subset: cell(subset),
      title: cell(title),
    });
  }
  return remotes;
}

/** Parses `flatpak list --app|--runtime --columns=application,arch,branch,origin,active`. */
export function parseInstalled(text: string, kind: "app" | "runtime"): InstalledRef[] {
  const refs: InstalledRef[] = [];
  for (const line of text.split("\n")) {
    const [id, arch, branch, origin, commit] = line.split("\t").map(cell);
    if (!id || !arch || !branch) continue;
    refs.push({ ref: `${kind}/${id}/${arch}/${branch}`, kind, id, branch, origin, commit });
  }
  return refs;
}

/** A public key as base64 (the GPGKey form of a .flatpakrepo file) → an ASCII-armoured key block. */
export function armorKey(base64: string): string {
  const compact = base64.replace(/\s+/g, "");
  const bytes = Uint8Array.from(atob(compact), (c) => c.charCodeAt(0));
  let crc = 0xb704ce;
  for (const byte of bytes) {
    crc ^= byte << 16;
    for (let i = 0; i < 8; i++) {
      crc <<= 1;
      if (crc & 0x1000000) crc ^= 0x1864cfb;
    }
  }
  crc &= 0xffffff;
  const checksum = btoa(String.fromCharCode(crc >> 16, (crc >> 8) & 0xff, crc & 0xff));
  const lines = btoa(String.fromCharCode(...bytes)).match(/.{1,64}/g) ?? [];
  return `-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n${
    lines.join("\n")
  }\n=${checksum}\n-----END PGP PUBLIC KEY BLOCK-----\n`;
}

function filterFile(filter: string): string {
  return `# Managed by svc: Flatpak remote filter\n${filter.trimEnd()}\n`;
}

function errorText(result: RunResult): string {
  const text = (result.stderr.trim() || result.stdout.trim()).split("\n").slice(-3).join(" ");
  return result.timedOut ? "timed out" : text || `exit code ${result.code}`;
}

/**
 * Deletes `~/.var/app/<appId>` of every account in `/etc/passwd` (flatpak's own `--delete-data` needs
 * the caller's session bus and covers only the caller). A home whose `.var`, `.var/app` or app
 * directory is a symbolic link is skipped, so a user cannot point the deletion elsewhere. Returns how
 * many directories were removed.
 */
async function deleteAppData(io: EnforcerIO, appId: string): Promise<number> {
  const passwd = await io.fs.readTextFile("/etc/passwd") ?? "";
  const homes = new Set(
    passwd.split("\n").map((l) => l.split(":")[5] ?? "").filter((h) => h.startsWith("/") && h !== "/"),
  );
  let removed = 0;
  for (const home of homes) {
    let base: string;
    try {
      base = await io.fs.resolve(home);
    } catch {
      continue;
    }
    const chain = [`${base}/.var`, `${base}/.var/app`, `${base}/.var/app/${appId}`];
    let safe = true;
    for (const path of chain) {
      const info = await Deno.lstat(path).catch(() => undefined);
      if (!info || info.isSymlink) {
        if (info?.isSymlink) io.logger.warn("app data behind a symbolic link left alone", { path });
        safe = false;
        break;
      }
    }
    if (!safe) continue;
    await Deno.remove(chain[2], { recursive: true });
    removed++;
  }
  return removed;
}

function refArg(app: FlatpakApp): string {
  return app.branch ? `${app.appId}//${app.branch}` : app.appId;
}

/** Builds the Flatpak enforcer; see the module documentation. */
export function createFlatpakEnforcer(options: FlatpakEnforcerOptions = {}): Enforcer {
  const transferTimeoutMs = options.transferTimeoutMs ?? 30 * 60_000;
  const hourMs = options.hourMs ?? 3_600_000;
  let subsetSupport: boolean | undefined;
  /** Syncs and periodic updates run one at a time. */
  let lock: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(work: () => Promise<T>): Promise<T> => {
    const run = lock.then(work, work);
    lock = run.catch(() => {});
    return run;
  };
  /** What the periodic update does, from the last sync; undefined without policies. */
  let updatePlan: { io: EnforcerIO; refs: string[]; intervalMs: number } | undefined;
  let updateTimer: { id: ReturnType<typeof setInterval>; intervalMs: number } | undefined;

  /** Updates the installed applications policies want (PRESENT and LATEST), between syncs. */
  function periodicUpdate(): Promise<void> {
    return exclusive(async () => {
      const plan = updatePlan;
      if (!plan) return;
      for (const ref of plan.refs) {
        const out = await flatpak(
          plan.io,
          ["--system", "update", "-y", "--noninteractive", ref],
          transferTimeoutMs,
        );
        if (out.success) plan.io.logger.info("flatpak periodic update", { ref });
        else plan.io.logger.warn("flatpak periodic update failed", { ref, error: errorText(out) });
      }
    });
  }

  /** Starts, restarts or stops the periodic update after a sync. */
  function schedule(): void {
    if (updateTimer && updateTimer.intervalMs !== updatePlan?.intervalMs) {
      clearInterval(updateTimer.id);
      updateTimer = undefined;
    }
    if (!updatePlan || updateTimer) return;
    const id = setInterval(() => void periodicUpdate(), updatePlan.intervalMs);
    // The timer never keeps the agent process alive on its own.
    Deno.unrefTimer(id as unknown as number);
    updateTimer = { id, intervalMs: updatePlan.intervalMs };
  }

  function flatpak(io: EnforcerIO, args: string[], timeoutMs = 120_000, stdin?: string): Promise<RunResult> {
    return io.runner.run("flatpak", args, { env: options.env, timeoutMs, stdin });
  }

  async function remotes(io: EnforcerIO): Promise<Map<string, RemoteSettings>> {
    const out = await flatpak(io, ["--system", "remotes", "--show-disabled", `--columns=${CHECKED_COLUMNS}`]);
    if (!out.success) throw new Error(`flatpak remotes failed: ${errorText(out)}`);
    return parseRemotes(out.stdout);
  }

  async function installed(io: EnforcerIO): Promise<InstalledRef[]> {
    const refs: InstalledRef[] = [];
    for (const kind of ["app", "runtime"] as const) {
      const out = await flatpak(io, ["--system", "list", `--${kind}`, `--columns=${LIST_COLUMNS}`]);
      if (!out.success) throw new Error(`flatpak list failed: ${errorText(out)}`);
      refs.push(...parseInstalled(out.stdout, kind));
    }
    return refs;
  }

  async function supportsSubsets(io: EnforcerIO): Promise<boolean> {
    if (subsetSupport === undefined) {
      const help = await flatpak(io, ["remote-add", "--help"]);
      subsetSupport = help.stdout.includes("--subset");
    }
    return subsetSupport;
  }

  /** Uninstalls refs svc installed that nobody wants, then deletes or restores remotes; returns problems. */
  async function undo(
    io: EnforcerIO,
    state: FlatpakState,
    keepRemotes: Set<string>,
    keepRefs: Set<string>,
  ): Promise<string[]> {
    const problems: string[] = [];
    const present = new Set((await installed(io)).map((r) => r.ref));
    // Applications first: a runtime can only go once nothing uses it.
    const stale = state.refs.filter((ref) => !keepRefs.has(ref))
      .sort((a, b) => (a.startsWith("app/") ? 0 : 1) - (b.startsWith("app/") ? 0 : 1));
    for (const ref of stale) {
      if (present.has(ref)) {
        const out = await flatpak(
          io,
          ["--system", "uninstall", "-y", "--noninteractive", ref],
          transferTimeoutMs,
        );
        if (!out.success) {
          // A runtime someone else's app still uses stays, and so does svc's record of it.
          problems.push(`${ref} was not removed: ${errorText(out)}`);
          continue;
        }
      }
      state.refs = state.refs.filter((r) => r !== ref);
      await saveState(io, state);
    }
    const current = await remotes(io);
    for (const [name, record] of Object.entries(state.remotes)) {
      if (keepRemotes.has(name)) continue;
      if (current.has(name)) {
        const out = record.added
          ? await flatpak(io, ["--system", "remote-delete", name])
          : await flatpak(io, [
            "--system",
            "remote-modify",
            `--url=${record.original.url}`,
            `--prio=${record.original.priority || "1"}`,
            record.original.filter ? `--filter=${record.original.filter}` : "--no-filter",
            ...(record.original.title ? [`--title=${record.original.title}`] : []),
            ...(await supportsSubsets(io) ? [`--subset=${record.original.subset}`] : []),
            name,
          ]);
        if (!out.success) {
          problems.push(`remote ${name} was not ${record.added ? "deleted" : "restored"}: ${errorText(out)}`);
          continue;
        }
      }
      delete state.remotes[name];
      await saveState(io, state);
    }
    return problems;
  }

  async function applyRemote(
    io: EnforcerIO,
    state: FlatpakState,
    remote: FlatpakRemote,
    current: Map<string, RemoteSettings>,
    changed: string[],
  ): Promise<ItemResult> {
    const key = `remote ${remote.name}`;
    const item = (status: ComplianceStatusName, message: string): ItemResult => ({
      schemaId: "remotes",
      key,
      status,
      message,
    });
    if (remote.subset && !(await supportsSubsets(io))) {
      return item("NON_COMPLIANT", "this node's flatpak does not support subsets (needs 1.12 or later)");
    }
    const keyPath = `${FLATPAK_FILES_DIR}/${remote.name}.asc`;
    const filterPath = `${FLATPAK_FILES_DIR}/${remote.name}.filter`;
    const keyChanged = await io.writeManaged(keyPath, armorKey(remote.gpgKey), { mode: 0o644 });
    if (keyChanged) changed.push(keyPath);
    let filterHost = "";
    if (remote.filter) {
      if (await io.writeManaged(filterPath, filterFile(remote.filter))) changed.push(filterPath);
      filterHost = await io.fs.resolve(filterPath);
    } else if (io.managedPaths().includes(filterPath) && await io.releaseManaged(filterPath)) {
      changed.push(filterPath);
    }
    const keyHost = await io.fs.resolve(keyPath);
    const settings = [
      `--prio=${remote.priority || 1}`,
      ...(remote.title ? [`--title=${remote.title}`] : []),
      ...(remote.subset || (await supportsSubsets(io) && current.get(remote.name)?.subset)
        ? [`--subset=${remote.subset}`]
        : []),
    ];
    const existing = current.get(remote.name);
    if (!existing) {
      state.remotes[remote.name] = { added: true };
      await saveState(io, state);
      const out = await flatpak(io, [
        "--system",
        "remote-add",
        `--gpg-import=${keyHost}`,
        ...settings,
        ...(filterHost ? [`--filter=${filterHost}`] : []),
        remote.name,
        remote.url,
      ]);
      if (!out.success) {
        // flatpak can leave a remote behind when the key import fails after creating it.
        await flatpak(io, ["--system", "remote-delete", "--force", remote.name]);
        delete state.remotes[remote.name];
        await saveState(io, state);
        return item("ERROR", `flatpak remote-add failed: ${errorText(out)}`);
      }
      return item("COMPLIANT", `added (${remote.url})`);
    }
    if (!state.remotes[remote.name]) {
      state.remotes[remote.name] = { added: false, original: existing };
      await saveState(io, state);
    }
    const wanted = {
      url: remote.url,
      priority: String(remote.priority || 1),
      filter: filterHost,
      subset: remote.subset,
    };
    const differs = existing.url !== wanted.url || existing.priority !== wanted.priority ||
      existing.filter !== wanted.filter || existing.subset !== wanted.subset ||
      (remote.title !== "" && existing.title !== remote.title);
    if (!differs && !keyChanged) {
      return item(
        "COMPLIANT",
        state.remotes[remote.name].added ? "unchanged" : "adopted existing remote, unchanged",
      );
    }
    const out = await flatpak(io, [
      "--system",
      "remote-modify",
      `--url=${remote.url}`,
      `--gpg-import=${keyHost}`,
      ...settings,
      filterHost ? `--filter=${filterHost}` : "--no-filter",
      remote.name,
    ]);
    if (!out.success) return item("ERROR", `flatpak remote-modify failed: ${errorText(out)}`);
    return item("COMPLIANT", state.remotes[remote.name].added ? "updated" : "adopted the existing remote");
  }

  async function applyApp(io: EnforcerIO, state: FlatpakState, app: FlatpakApp): Promise<string> {
    const before = await installed(io);
    const mine = before.find((r) =>
      r.kind === "app" && r.id === app.appId && (!app.branch || r.branch === app.branch)
    );
    if (app.state === FlatpakAppState.ABSENT) {
      if (!mine) return "not installed";
      const out = await flatpak(io, [
        "--system",
        "uninstall",
        "-y",
        "--noninteractive",
        mine.ref,
      ], transferTimeoutMs);
      if (!out.success) throw new Error(`flatpak uninstall failed: ${errorText(out)}`);
      state.refs = state.refs.filter((r) => r !== mine.ref);
      await saveState(io, state);
      if (!app.deleteData) return "removed";
      const homes = await deleteAppData(io, app.appId);
      return `removed with its data (${homes} home director${homes === 1 ? "y" : "ies"})`;
    }
    if (mine && app.state === FlatpakAppState.PRESENT) return `installed (commit ${mine.commit})`;
    if (mine) {
      const out = await flatpak(
        io,
        ["--system", "update", "-y", "--noninteractive", mine.ref],
        transferTimeoutMs,
      );
      if (!out.success) throw new Error(`flatpak update failed: ${errorText(out)}`);
      const after = (await installed(io)).find((r) => r.ref === mine.ref);
      return after && after.commit !== mine.commit
        ? `updated from commit ${mine.commit} to ${after.commit}`
        : `up to date (commit ${mine.commit})`;
    }
    const out = await flatpak(io, [
      "--system",
      "install",
      "-y",
      "--noninteractive",
      app.remote,
      refArg(app),
    ], transferTimeoutMs);
    const known = new Set(before.map((r) => r.ref));
    const after = await installed(io);
    const added = after.filter((r) => !known.has(r.ref)).map((r) => r.ref);
    if (added.length) {
      state.refs.push(...added);
      await saveState(io, state);
    }
    if (!out.success) throw new Error(`flatpak install failed: ${errorText(out)}`);
    const now = after.find((r) => r.kind === "app" && r.id === app.appId);
    return `installed from ${app.remote}${now ? ` (commit ${now.commit})` : ""}`;
  }

  /** Reads the installation back and checks one application against its wanted state. */
  function appItem(app: FlatpakApp, list: InstalledRef[], outcome: string, failure?: string): ItemResult {
    const found = list.find((r) =>
      r.kind === "app" && r.id === app.appId && (!app.branch || r.branch === app.branch)
    );
    const wantInstalled = app.state !== FlatpakAppState.ABSENT;
    let status: ComplianceStatusName;
    let message: string;
    if (failure) {
      status = "ERROR";
      message = failure;
    } else if (wantInstalled === Boolean(found)) {
      status = "COMPLIANT";
      message = outcome;
    } else {
      status = "NON_COMPLIANT";
      message = wantInstalled ? `not installed after "${outcome}"` : `still installed after "${outcome}"`;
    }
    return { schemaId: "apps", key: `app ${app.appId}`, status, message };
  }

  function remoteItem(
    remote: FlatpakRemote,
    current: Map<string, RemoteSettings>,
    applied: ItemResult,
  ): ItemResult {
    if (applied.status !== "COMPLIANT") return applied;
    const found = current.get(remote.name);
    const problems: string[] = [];
    if (!found) problems.push("missing");
    else {
      if (found.url.replace(/\/$/, "") !== remote.url.replace(/\/$/, "")) {
        problems.push(`URL is ${found.url}`);
      }
      if (found.priority !== String(remote.priority || 1)) problems.push(`priority is ${found.priority}`);
      if ((found.filter !== "") !== (remote.filter !== "")) {
        problems.push(remote.filter ? "no filter set" : `filter ${found.filter} set`);
      }
      if (remote.subset && found.subset !== remote.subset) problems.push(`subset is "${found.subset}"`);
    }
    return problems.length
      ? { ...applied, status: "NON_COMPLIANT", message: `read back: ${problems.join(", ")}` }
      : applied;
  }

  return {
    type: flatpakType.wireName,
    notifiesUsers: false,
    background: true,
    // flatpak installed later, and applications users install or remove themselves (an ABSENT app installed
    // by a user is taken out again; a PRESENT one removed comes back).
    watches: () => needWatches(NEEDS, ["/var/lib/flatpak/app"]),

    residue: { stateFile: FLATPAK_STATE_FILE },
    async hasResidue(io) {
      return !isEmptyState(await loadState(io));
    },

    async sync(policies: CachedPolicy[], io: EnforcerIO): Promise<SyncResult> {
      try {
        return await exclusive(() => syncNow(policies, io));
      } finally {
        schedule();
      }
    },
  };

  async function syncNow(policies: CachedPolicy[], io: EnforcerIO): Promise<SyncResult> {
    updatePlan = undefined;
    const changed: string[] = [];
    const checked = revalidate("Flatpak", policies, {
      check: (policy) => checkedContent(policy, flatpakType),
      logger: io.logger,
    });
    const results: PolicyResult[] = checked.rejected;
    const valid = checked.valid.map(({ policy, message }) => ({ policy, content: message }));
    const state = await loadState(io);

    const missing = await missingNeed(io, NEEDS);
    if (missing) {
      if (!isEmptyState(state)) {
        io.logger.warn("flatpak is gone; svc forgets the remotes and apps it had added");
        await saveState(io, { version: 1, remotes: {}, refs: [] });
      }
      for (const path of io.managedPaths()) if (await io.releaseManaged(path)) changed.push(path);
      results.push(...resultsForAll(valid, "INAPPLICABLE", missing));
      return { policies: results, changed };
    }

    // Merge: the first policy naming a remote or app wins (policies come sorted by priority).
    const remoteWinners = new Map<string, Owned<FlatpakRemote>>();
    const appWinners = new Map<string, Owned<FlatpakApp>>();
    const items = new Map<string, ItemResult[]>(valid.map(({ policy }) => [policy.id, []]));
    let removeUnused: Owned<boolean> | undefined;
    for (const { policy, content } of valid) {
      for (const remote of content.remotes) {
        const winner = remoteWinners.get(remote.name);
        if (!winner) remoteWinners.set(remote.name, { policy, value: remote });
        else {
          items.get(policy.id)!.push({
            schemaId: "remotes",
            key: `remote ${remote.name}`,
            status: "INAPPLICABLE",
            message: overriddenBy(winner.policy),
          });
        }
      }
      for (const app of content.apps) {
        const winner = appWinners.get(app.appId);
        if (!winner) appWinners.set(app.appId, { policy, value: app });
        else {
          items.get(policy.id)!.push({
            schemaId: "apps",
            key: `app ${app.appId}`,
            status: "INAPPLICABLE",
            message: overriddenBy(winner.policy),
          });
        }
      }
      if (content.removeUnusedRuntimes && !removeUnused) removeUnused = { policy, value: true };
      if (content.allowUserInstalls !== undefined) {
        items.get(policy.id)!.push({
          schemaId: "settings",
          key: "allow_user_installs",
          status: "UNKNOWN",
          message: "not enforced by this agent version (the node's default applies)",
        });
      }
    }

    // Undo what no policy wants any more before applying, so a renamed remote is not doubled;
    // apps a policy names (ABSENT included) are left to applyApp, which reports their outcome.
    const wantedRemotes = new Set(remoteWinners.keys());
    const keepRefs = async (): Promise<Set<string>> => {
      const keep = new Set<string>();
      let svcAppStays = false;
      for (const r of await installed(io)) {
        const app = r.kind === "app" ? appWinners.get(r.id)?.value : undefined;
        if (!app || (app.branch && r.branch !== app.branch)) continue;
        keep.add(r.ref);
        if (app.state !== FlatpakAppState.ABSENT && state.refs.includes(r.ref)) svcAppStays = true;
      }
      // Runtimes svc pulled stay while an app svc installed stays.
      if (svcAppStays) { for (const ref of state.refs) if (ref.startsWith("runtime/")) keep.add(ref); }
      return keep;
    };
    const undoProblems = await undo(io, state, wantedRemotes, await keepRefs());
    for (const path of io.managedPaths()) {
      const name = path.slice(FLATPAK_FILES_DIR.length + 1).replace(/\.(asc|filter)$/, "");
      if (!wantedRemotes.has(name) && await io.releaseManaged(path)) changed.push(path);
    }

    let current = await remotes(io);
    const applied = new Map<string, ItemResult>();
    for (const [name, { value }] of remoteWinners) {
      try {
        applied.set(name, await applyRemote(io, state, value, current, changed));
      } catch (err) {
        applied.set(name, {
          schemaId: "remotes",
          key: `remote ${name}`,
          status: "ERROR",
          message: (err as Error).message,
        });
      }
    }
    const outcomes = new Map<string, { outcome: string; failure?: string }>();
    for (const [id, { value }] of appWinners) {
      const remoteFailed = value.state !== FlatpakAppState.ABSENT &&
        applied.get(value.remote) && applied.get(value.remote)!.status !== "COMPLIANT";
      if (remoteFailed) {
        outcomes.set(id, { outcome: "", failure: `remote ${value.remote} is not usable` });
        continue;
      }
      try {
        outcomes.set(id, { outcome: await applyApp(io, state, value) });
      } catch (err) {
        outcomes.set(id, { outcome: "", failure: (err as Error).message });
      }
    }
    if (removeUnused) {
      const out = await flatpak(
        io,
        ["--system", "uninstall", "--unused", "-y", "--noninteractive"],
        transferTimeoutMs,
      );
      items.get(removeUnused.policy.id)!.push({
        schemaId: "settings",
        key: "remove_unused_runtimes",
        status: out.success ? "COMPLIANT" : "ERROR",
        message: out.success ? "unused runtimes removed" : errorText(out),
      });
      if (out.success) {
        const left = new Set((await installed(io)).map((r) => r.ref));
        state.refs = state.refs.filter((r) => left.has(r));
        await saveState(io, state);
      }
    }

    // Runtimes left unused by the apps just removed.
    undoProblems.push(...await undo(io, state, wantedRemotes, await keepRefs()));
    if (undoProblems.length) io.logger.warn("Flatpak cleanup incomplete", { problems: undoProblems });

    // Read back.
    current = await remotes(io);
    const list = await installed(io);
    for (const [name, { policy, value }] of remoteWinners) {
      items.get(policy.id)!.push(remoteItem(value, current, applied.get(name)!));
    }
    for (const [id, { policy, value }] of appWinners) {
      const { outcome, failure } = outcomes.get(id)!;
      items.get(policy.id)!.push(appItem(value, list, outcome, failure));
    }
    for (const { policy } of valid) {
      const list = items.get(policy.id)!;
      const status = rollupStatus(list);
      const bad = list.filter((i) => i.status === "ERROR" || i.status === "NON_COMPLIANT");
      results.push({
        policyId: policy.id,
        status,
        message: bad.length
          ? rollupMessage(list, "item(s)")
          : `${list.filter((i) => i.status === "COMPLIANT").length} remote(s) and app(s) in effect`,
        items: list,
      });
    }
    const hours = valid.find(({ content }) => content.updateIntervalHours > 0)?.content.updateIntervalHours ??
      DEFAULT_UPDATE_INTERVAL_HOURS;
    const keep = list.filter((r) =>
      r.kind === "app" &&
      [FlatpakAppState.PRESENT, FlatpakAppState.LATEST].includes(appWinners.get(r.id)?.value.state!)
    );
    if (valid.length) updatePlan = { io, refs: keep.map((r) => r.ref), intervalMs: hours * hourMs };
    return { policies: results, changed };
  }
}

/** The Flatpak enforcer on the node's system installation. */
export const flatpakEnforcer: Enforcer = createFlatpakEnforcer();
