/**
 * The single changes the Flatpak type makes to the system installation with the `flatpak` command, each recorded
 * in svc's state as it happens: taking back refs and remotes svc added, adding or adopting a remote, bringing an
 * application to its wanted state, removing unused runtimes; and how each remote and application is judged
 * against what flatpak lists afterwards.
 *
 * @module
 */

import {
  type FlatpakApp,
  FlatpakAppState,
  type FlatpakRemote,
} from "../../../shared/gen/svc/policy/v1/flatpak_pb.ts";
import type { ComplianceStatusName, EnforcerIO } from "../../sync/types.ts";
import { passwdEntries } from "../node_accounts.ts";
import { errorText, type FlatpakCli, type InstalledRef, type RemoteSettings } from "./cli.ts";
import { filterPath, keyPath } from "./files.ts";
import { type FlatpakState, saveState } from "./state.ts";

/** An item's status and message. */
export type Judged = [ComplianceStatusName, string];

/** See the module documentation. */
export class FlatpakCommands {
  readonly #cli: FlatpakCli;

  constructor(cli: FlatpakCli) {
    this.#cli = cli;
  }

  /** Uninstalls refs svc installed that nobody wants, then deletes or restores remotes; returns problems. */
  async undo(io: EnforcerIO, state: FlatpakState, keepRemotes: Set<string>, keepRefs: Set<string>) {
    const cli = this.#cli;
    const problems: string[] = [];
    const present = new Set((await cli.installed(io)).map((r) => r.ref));
    // Applications first: a runtime can only go once nothing uses it.
    const stale = state.refs.filter((ref) => !keepRefs.has(ref))
      .sort((a, b) => (a.startsWith("app/") ? 0 : 1) - (b.startsWith("app/") ? 0 : 1));
    for (const ref of stale) {
      if (present.has(ref)) {
        const out = await cli.transfer(io, ["--system", "uninstall", "-y", "--noninteractive", ref]);
        if (!out.success) {
          // A runtime someone else's app still uses stays, and so does svc's record of it.
          problems.push(`${ref} was not removed: ${errorText(out)}`);
          continue;
        }
      }
      state.refs = state.refs.filter((r) => r !== ref);
      await saveState(io, state);
    }
    const current = await cli.remotes(io);
    for (const [name, record] of Object.entries(state.remotes)) {
      if (keepRemotes.has(name)) continue;
      if (current.has(name)) {
        const out = record.added
          ? await cli.run(io, ["--system", "remote-delete", name])
          : await cli.run(io, [
            "--system",
            "remote-modify",
            `--url=${record.original.url}`,
            `--prio=${record.original.priority || "1"}`,
            record.original.filter ? `--filter=${record.original.filter}` : "--no-filter",
            ...(record.original.title ? [`--title=${record.original.title}`] : []),
            ...(await cli.supportsSubsets(io) ? [`--subset=${record.original.subset}`] : []),
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

  /** Adds, adopts or modifies `remote` (its key and filter files have landed); what happened, or why not. */
  async applyRemote(
    io: EnforcerIO,
    state: FlatpakState,
    remote: FlatpakRemote,
    current: Map<string, RemoteSettings>,
    keyChanged: boolean,
  ): Promise<Judged> {
    const cli = this.#cli;
    const filterHost = remote.filter ? await io.fs.resolve(filterPath(remote.name)) : "";
    const keyHost = await io.fs.resolve(keyPath(remote.name));
    const settings = [
      `--prio=${remote.priority || 1}`,
      ...(remote.title ? [`--title=${remote.title}`] : []),
      ...(remote.subset || (await cli.supportsSubsets(io) && current.get(remote.name)?.subset)
        ? [`--subset=${remote.subset}`]
        : []),
    ];
    const existing = current.get(remote.name);
    if (!existing) {
      state.remotes[remote.name] = { added: true };
      await saveState(io, state);
      const out = await cli.run(io, [
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
        await cli.run(io, ["--system", "remote-delete", "--force", remote.name]);
        delete state.remotes[remote.name];
        await saveState(io, state);
        return ["ERROR", `flatpak remote-add failed: ${errorText(out)}`];
      }
      return ["COMPLIANT", `added (${remote.url})`];
    }
    if (!state.remotes[remote.name]) {
      state.remotes[remote.name] = { added: false, original: existing };
      await saveState(io, state);
    }
    const added = state.remotes[remote.name].added;
    const differs = existing.url !== remote.url || existing.priority !== String(remote.priority || 1) ||
      existing.filter !== filterHost || existing.subset !== remote.subset ||
      (remote.title !== "" && existing.title !== remote.title);
    if (!differs && !keyChanged) {
      return ["COMPLIANT", added ? "unchanged" : "adopted existing remote, unchanged"];
    }
    const out = await cli.run(io, [
      "--system",
      "remote-modify",
      `--url=${remote.url}`,
      `--gpg-import=${keyHost}`,
      ...settings,
      filterHost ? `--filter=${filterHost}` : "--no-filter",
      remote.name,
    ]);
    if (!out.success) return ["ERROR", `flatpak remote-modify failed: ${errorText(out)}`];
    return ["COMPLIANT", added ? "updated" : "adopted the existing remote"];
  }

  /** Brings `app` to its wanted state; resolves what happened, throws what went wrong. */
  async applyApp(io: EnforcerIO, state: FlatpakState, app: FlatpakApp): Promise<string> {
    const cli = this.#cli;
    const before = await cli.installed(io);
    const mine = before.find((r) => isApp(r, app));
    if (app.state === FlatpakAppState.ABSENT) {
      if (!mine) return "not installed";
      const out = await cli.transfer(io, ["--system", "uninstall", "-y", "--noninteractive", mine.ref]);
      if (!out.success) throw new Error(`flatpak uninstall failed: ${errorText(out)}`);
      state.refs = state.refs.filter((r) => r !== mine.ref);
      await saveState(io, state);
      if (!app.deleteData) return "removed";
      const homes = await deleteAppData(io, app.appId);
      return `removed with its data (${homes} home director${homes === 1 ? "y" : "ies"})`;
    }
    if (mine && app.state === FlatpakAppState.PRESENT) return `installed (commit ${mine.commit})`;
    if (mine) {
      const out = await cli.transfer(io, ["--system", "update", "-y", "--noninteractive", mine.ref]);
      if (!out.success) throw new Error(`flatpak update failed: ${errorText(out)}`);
      const after = (await cli.installed(io)).find((r) => r.ref === mine.ref);
      return after && after.commit !== mine.commit
        ? `updated from commit ${mine.commit} to ${after.commit}`
        : `up to date (commit ${mine.commit})`;
    }
    const ref = app.branch ? `${app.appId}//${app.branch}` : app.appId;
    const out = await cli.transfer(io, ["--system", "install", "-y", "--noninteractive", app.remote, ref]);
    const known = new Set(before.map((r) => r.ref));
    const after = await cli.installed(io);
    const added = after.filter((r) => !known.has(r.ref)).map((r) => r.ref);
    if (added.length) {
      state.refs.push(...added);
      await saveState(io, state);
    }
    if (!out.success) throw new Error(`flatpak install failed: ${errorText(out)}`);
    const now = after.find((r) => r.kind === "app" && r.id === app.appId);
    return `installed from ${app.remote}${now ? ` (commit ${now.commit})` : ""}`;
  }

  /** `flatpak uninstall --unused`; svc forgets the refs that went. Resolves the item's status and message. */
  async removeUnused(io: EnforcerIO, state: FlatpakState): Promise<Judged> {
    const out = await this.#cli.transfer(io, ["--system", "uninstall", "--unused", "-y", "--noninteractive"]);
    if (!out.success) return ["ERROR", errorText(out)];
    const left = new Set((await this.#cli.installed(io)).map((r) => r.ref));
    state.refs = state.refs.filter((r) => left.has(r));
    await saveState(io, state);
    return ["COMPLIANT", "unused runtimes removed"];
  }
}

/** Whether `ref` is the application `app` names (its branch, when it names one). */
export function isApp(ref: InstalledRef, app: FlatpakApp): boolean {
  return ref.kind === "app" && ref.id === app.appId && (!app.branch || ref.branch === app.branch);
}

/** One application against the installation read back, after `outcome` (or `failure`). */
export function judgeApp(app: FlatpakApp, list: InstalledRef[], outcome: string, failure?: string): Judged {
  if (failure) return ["ERROR", failure];
  const wantInstalled = app.state !== FlatpakAppState.ABSENT;
  if (wantInstalled === list.some((r) => isApp(r, app))) return ["COMPLIANT", outcome];
  return [
    "NON_COMPLIANT",
    wantInstalled ? `not installed after "${outcome}"` : `still installed after "${outcome}"`,
  ];
}

/** One remote against the remotes read back, after it was applied as `applied`. */
export function judgeRemote(
  remote: FlatpakRemote,
  current: Map<string, RemoteSettings>,
  applied: Judged,
): Judged {
  if (applied[0] !== "COMPLIANT") return applied;
  const found = current.get(remote.name);
  const problems: string[] = [];
  if (!found) problems.push("missing");
  else {
    if (found.url.replace(/\/$/, "") !== remote.url.replace(/\/$/, "")) problems.push(`URL is ${found.url}`);
    if (found.priority !== String(remote.priority || 1)) problems.push(`priority is ${found.priority}`);
    if ((found.filter !== "") !== (remote.filter !== "")) {
      problems.push(remote.filter ? "no filter set" : `filter ${found.filter} set`);
    }
    if (remote.subset && found.subset !== remote.subset) problems.push(`subset is "${found.subset}"`);
  }
  return problems.length ? ["NON_COMPLIANT", `read back: ${problems.join(", ")}`] : applied;
}

/**
 * Deletes `~/.var/app/<appId>` of every account in `/etc/passwd` (flatpak's own `--delete-data` needs
 * the caller's session bus and covers only the caller). A home whose `.var`, `.var/app` or app
 * directory is a symbolic link is skipped, so a user cannot point the deletion elsewhere. Returns how
 * many directories were removed.
 */
async function deleteAppData(io: EnforcerIO, appId: string): Promise<number> {
  const homes = new Set(
    (await passwdEntries(io)).map((e) => e.home).filter((h) => h.startsWith("/") && h !== "/"),
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
