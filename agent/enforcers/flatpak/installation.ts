/**
 * What the Flatpak type changes in the system installation besides its files, in a fixed order, one change at a
 * time and recorded in svc's state (there is no rollback): taking back what no policy wants (apps before
 * runtimes, then remotes svc added are deleted and adopted ones restored; nothing svc did not add is removed),
 * then the remotes (added with the key file svc wrote, or adopted: modified in place, never duplicated), then the
 * applications (PRESENT installs when missing, LATEST installs or updates, ABSENT uninstalls, optionally with
 * every user's data of it), then unused runtimes, then a second round of taking back for the runtimes the removed
 * apps left.
 *
 * @module
 */

import {
  type FlatpakApp,
  FlatpakAppState,
  type FlatpakRemote,
} from "../../../shared/gen/svc/policy/v1/flatpak_pb.ts";
import type { EnforcerIO } from "../../sync/types.ts";
import type { FlatpakCli } from "./cli.ts";
import { FlatpakCommands, type Judged } from "./commands.ts";
import { filterPath, keyPath } from "./files.ts";
import type { FlatpakState } from "./state.ts";

/** What the policies want of the installation, and (once applied) what applying did. */
export interface InstallationPlan {
  state: FlatpakState;
  /** The winning remotes and applications. */
  remotes: FlatpakRemote[];
  apps: FlatpakApp[];
  removeUnused: boolean;
  /** Remote name → what applying it did (set before applying for a remote that cannot be applied). */
  applied: Map<string, Judged>;
  /** App id → what applying it did, or why it failed. */
  outcomes: Map<string, { outcome: string; failure?: string }>;
  /** What `flatpak uninstall --unused` did. */
  unused?: Judged;
  /** What taking back ran into, logged once when applying is done. */
  problems: string[];
}

/** See the module documentation. */
export class Installation {
  readonly #cli: FlatpakCli;
  readonly #commands: FlatpakCommands;

  constructor(cli: FlatpakCli) {
    this.#cli = cli;
    this.#commands = new FlatpakCommands(cli);
  }

  /** Takes back what `plan` does not want (everything without one: nothing is to do); logs what stays. */
  async withdraw(io: EnforcerIO, state: FlatpakState, plan: InstallationPlan | undefined): Promise<void> {
    const problems = await this.#undo(io, state, plan);
    if (plan) return void plan.problems.push(...problems);
    // Without a plan this is the last round: a runtime another taken-back runtime needed goes in a second one.
    if (problems.length) problems.push(...await this.#undo(io, state, plan));
    if (problems.length) io.logger.warn("Flatpak cleanup incomplete", { problems });
  }

  /** Applies `plan` after its key and filter files landed (`failed`, `changed` as the landing reported). */
  async apply(
    io: EnforcerIO,
    plan: InstallationPlan,
    landed: { failed: Map<string, string>; changed: string[] },
  ) {
    const current = await this.#cli.remotes(io);
    for (const remote of plan.remotes) {
      if (plan.applied.has(remote.name)) continue;
      const unwritten = landed.failed.get(keyPath(remote.name)) ?? landed.failed.get(filterPath(remote.name));
      const keyChanged = landed.changed.includes(keyPath(remote.name));
      plan.applied.set(
        remote.name,
        unwritten
          ? ["ERROR", unwritten]
          : await this.#commands.applyRemote(io, plan.state, remote, current, keyChanged)
            .catch((err): Judged => ["ERROR", (err as Error).message]),
      );
    }
    for (const app of plan.apps) {
      const remote = plan.applied.get(app.remote);
      if (app.state !== FlatpakAppState.ABSENT && remote && remote[0] !== "COMPLIANT") {
        plan.outcomes.set(app.appId, { outcome: "", failure: `remote ${app.remote} is not usable` });
        continue;
      }
      plan.outcomes.set(
        app.appId,
        await this.#commands.applyApp(io, plan.state, app).then(
          (outcome) => ({ outcome }),
          (err) => ({ outcome: "", failure: (err as Error).message }),
        ),
      );
    }
    if (plan.removeUnused) plan.unused = await this.#commands.removeUnused(io, plan.state);
    // Runtimes left unused by the apps just removed.
    plan.problems.push(...await this.#undo(io, plan.state, plan));
    if (plan.problems.length) io.logger.warn("Flatpak cleanup incomplete", { problems: plan.problems });
  }

  async #undo(io: EnforcerIO, state: FlatpakState, plan: InstallationPlan | undefined): Promise<string[]> {
    const remotes = new Set(plan?.remotes.map((r) => r.name));
    return await this.#commands.undo(io, state, remotes, await this.#keepRefs(io, plan));
  }

  /** Refs that stay: those of the apps policies name, and the runtimes svc pulled while an app svc installed stays. */
  async #keepRefs(io: EnforcerIO, plan: InstallationPlan | undefined): Promise<Set<string>> {
    const keep = new Set<string>();
    if (!plan) return keep;
    let svcAppStays = false;
    for (const r of await this.#cli.installed(io)) {
      const app = r.kind === "app" ? plan.apps.find((a) => a.appId === r.id) : undefined;
      if (!app || (app.branch && r.branch !== app.branch)) continue;
      keep.add(r.ref);
      if (app.state !== FlatpakAppState.ABSENT && plan.state.refs.includes(r.ref)) svcAppStays = true;
    }
    if (svcAppStays) { for (const ref of plan.state.refs) if (ref.startsWith("runtime/")) keep.add(ref); }
    return keep;
  }
}
