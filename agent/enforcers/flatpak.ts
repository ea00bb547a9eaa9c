/**
 * Flatpak: system-wide remotes and applications, applied with the real `flatpak` command.
 *
 * 1. Policies merge by priority: remotes by name, applications by app id; the first (highest priority, then
 *    smallest id) wins, and a losing entry is reported INAPPLICABLE naming the winner.
 * 2. Each winning remote's signing key and filter are files svc manages (`flatpak/files.ts`); a remote asking for
 *    a subset this node's flatpak cannot set (before 1.12) is NON_COMPLIANT and gets none.
 * 3. What no policy wants any more is taken back first (so a renamed remote is not doubled), then the remotes and
 *    applications are applied (`flatpak/installation.ts`: adoption, installs, updates, removals, all recorded in
 *    `{data_dir}/state/flatpak.json`), then runtimes left unused by removed apps go.
 * 4. Everything is read back (`flatpak remotes`, `flatpak list`) and reported per remote and per app.
 * 5. Between syncs the installed PRESENT and LATEST apps are updated every `update_interval_hours` (the
 *    highest-priority policy that sets it; {@linkcode DEFAULT_UPDATE_INTERVAL_HOURS} otherwise), never at the same
 *    time as a sync (`flatpak/updates.ts`).
 *
 * The type runs in the engine's background lane (downloads take long), on the system installation, which
 * `FLATPAK_SYSTEM_DIR` in the agent's environment (or {@linkcode FlatpakEnforcerOptions.env}) can move.
 *
 * A desktop type over `desktop_enforcer.ts`: re-validation, flatpak missing (every policy INAPPLICABLE, and
 * watched), the key and filter files, nothing-to-do, the priority merge and the rollup are the skeleton's; the
 * installation is its {@linkcode Effects}: withdrawn before the files go, applied after they land, and forgotten
 * when flatpak is gone (it cannot be taken back without the command).
 *
 * @module
 */

import {
  type FlatpakApp,
  FlatpakAppState,
  type FlatpakPolicy,
  type FlatpakRemote,
} from "../../shared/gen/svc/policy/v1/flatpak_pb.ts";
import { flatpakType } from "../../shared/policy_types/flatpak.ts";
import type { CachedPolicy, Enforcer, ItemResult } from "../sync/types.ts";
import { checkedContent } from "./revalidate.ts";
import { desktopEnforcer, type DesktopPlan, summarize, Winners } from "./desktop_enforcer.ts";
import { FlatpakCli, type InstalledRef, type RemoteSettings } from "./flatpak/cli.ts";
import { judgeApp, judgeRemote } from "./flatpak/commands.ts";
import { armorKey, filterPath, filterText, keyPath } from "./flatpak/files.ts";
import { Installation, type InstallationPlan } from "./flatpak/installation.ts";
import { emptyState, isEmptyState, loadState, saveState } from "./flatpak/state.ts";
import { PeriodicUpdates } from "./flatpak/updates.ts";
import { FLATPAK_STATE_FILE } from "./state_file.ts";

export { parseInstalled, parseRemotes } from "./flatpak/cli.ts";

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

interface Owned<T> {
  policy: CachedPolicy;
  value: T;
}

/** What the Flatpak type lands and applies. */
interface FlatpakPlan extends DesktopPlan {
  remotes: Winners<Owned<FlatpakRemote>>;
  apps: Winners<Owned<FlatpakApp>>;
  /** The policy whose `remove_unused_runtimes` applies. */
  removeUnused?: CachedPolicy;
  /** Items per policy besides its remotes and apps (settings). */
  settled: Map<string, ItemResult[]>;
  /** What the winners want of the installation; applying records its outcomes there. */
  install: InstallationPlan;
  /** Hours between periodic updates. */
  hours: number;
}

/** The installation as read back. */
interface FlatpakReading {
  current: Map<string, RemoteSettings>;
  list: InstalledRef[];
}

/** Builds the Flatpak enforcer; see the module documentation. */
export function createFlatpakEnforcer(options: FlatpakEnforcerOptions = {}): Enforcer {
  const hourMs = options.hourMs ?? 3_600_000;
  const cli = new FlatpakCli({
    env: options.env,
    transferTimeoutMs: options.transferTimeoutMs ?? 30 * 60_000,
  });
  const installation = new Installation(cli);
  const updates = new PeriodicUpdates(cli);

  const enforcer = desktopEnforcer<FlatpakPolicy, FlatpakPlan, FlatpakReading>({
    type: flatpakType.wireName,
    notifiesUsers: false,
    check: (policy) => checkedContent(policy, flatpakType),
    needs: [{ command: "flatpak", missing: "flatpak is not installed on this node" }],
    // Applications users install or remove themselves (an ABSENT app installed by a user is taken out again; a
    // PRESENT one removed comes back).
    reads: ["/var/lib/flatpak/app"],
    async plan(valid, io) {
      const remotes = new Winners<Owned<FlatpakRemote>>();
      const apps = new Winners<Owned<FlatpakApp>>();
      const settled = new Map<string, ItemResult[]>(valid.map(({ policy }) => [policy.id, []]));
      let removeUnused: CachedPolicy | undefined;
      for (const { policy, message } of valid) {
        for (const remote of message.remotes) remotes.add(remote.name, { policy, value: remote });
        for (const app of message.apps) apps.add(app.appId, { policy, value: app });
        if (message.removeUnusedRuntimes) removeUnused ??= policy;
        if (message.allowUserInstalls !== undefined) {
          settled.get(policy.id)!.push({
            schemaId: "settings",
            key: "allow_user_installs",
            status: "UNKNOWN",
            message: "not enforced by this agent version (the node's default applies)",
          });
        }
      }
      const install: InstallationPlan = {
        state: await loadState(io),
        remotes: remotes.values().map((r) => r.value),
        apps: apps.values().map((a) => a.value),
        removeUnused: removeUnused !== undefined,
        applied: new Map(),
        outcomes: new Map(),
        problems: [],
      };
      const files = new Map<string, string>();
      for (const remote of install.remotes) {
        if (remote.subset && !(await cli.supportsSubsets(io))) {
          install.applied.set(remote.name, [
            "NON_COMPLIANT",
            "this node's flatpak does not support subsets (needs 1.12 or later)",
          ]);
          continue;
        }
        try {
          files.set(keyPath(remote.name), armorKey(remote.gpgKey));
        } catch (err) {
          install.applied.set(remote.name, [
            "ERROR",
            `the signing key cannot be read: ${(err as Error).message}`,
          ]);
          continue;
        }
        if (remote.filter) files.set(filterPath(remote.name), filterText(remote.filter));
      }
      const hours = valid.find(({ message }) => message.updateIntervalHours > 0)?.message.updateIntervalHours;
      return {
        files,
        remotes,
        apps,
        removeUnused,
        settled,
        install,
        hours: hours ?? DEFAULT_UPDATE_INTERVAL_HOURS,
      };
    },
    effects: {
      withdraw: async (io, wanted) =>
        await installation.withdraw(io, wanted?.install.state ?? await loadState(io), wanted?.install),
      async apply(io, plan, landed) {
        await installation.apply(io, plan.install, landed);
        if (plan.removeUnused && plan.install.unused) {
          const [status, message] = plan.install.unused;
          plan.settled.get(plan.removeUnused.id)!.push({
            schemaId: "settings",
            key: "remove_unused_runtimes",
            status,
            message,
          });
        }
      },
      async forget(io) {
        if (isEmptyState(await loadState(io))) return;
        io.logger.warn("flatpak is gone; svc forgets the remotes and apps it had added");
        await saveState(io, emptyState());
      },
    },
    async readBack(io, plan) {
      const reading = { current: await cli.remotes(io), list: await cli.installed(io) };
      // The periodic update keeps the apps policies want installed (PRESENT and LATEST) as read back.
      const kept = [FlatpakAppState.PRESENT, FlatpakAppState.LATEST];
      const refs = reading.list.filter((r) =>
        r.kind === "app" && kept.includes(plan.apps.winner(r.id)?.value.state!)
      )
        .map((r) => r.ref);
      updates.plan({ io, refs, intervalMs: plan.hours * hourMs });
      return reading;
    },
    report({ policy }, { plan, state }) {
      const items = [
        ...plan.remotes.itemsOf(policy.id, {
          id: (r) => r.value.name,
          item: (r) => ({ schemaId: "remotes", key: `remote ${r.value.name}` }),
          judge: (_, r) => judgeRemote(r.value, state.current, plan.install.applied.get(r.value.name)!),
        }),
        ...plan.apps.itemsOf(policy.id, {
          id: (a) => a.value.appId,
          item: (a) => ({ schemaId: "apps", key: `app ${a.value.appId}` }),
          judge(_, a) {
            const { outcome, failure } = plan.install.outcomes.get(a.value.appId)!;
            return judgeApp(a.value, state.list, outcome, failure);
          },
        }),
        ...plan.settled.get(policy.id)!,
      ];
      const words = {
        inEffect: (ok: number) => `${ok} remote(s) and app(s) in effect`,
        none: "remote or app",
      };
      return { ...summarize(items, { ...words, noun: "item(s)" }), items };
    },
  });

  return {
    ...enforcer,
    background: true,
    residue: { stateFile: FLATPAK_STATE_FILE },
    async hasResidue(io) {
      return !isEmptyState(await loadState(io));
    },
    async sync(policies, io) {
      try {
        return await updates.exclusive(() => {
          updates.plan(undefined);
          return enforcer.sync(policies, io);
        });
      } finally {
        updates.schedule();
      }
    },
  };
}

/** The Flatpak enforcer on the node's system installation. */
export const flatpakEnforcer: Enforcer = createFlatpakEnforcer();
