/**
 * Where enforcers keep what they must remember across restarts (`{data_dir}/state/`), in a module of its own
 * so the lazy registry (lazy.ts) can tell from a state file's presence whether a type left anything to take
 * back, without loading the type's enforcer (see `Enforcer.residue`).
 *
 * @module
 */

import type { EnforcerIO } from "../sync/types.ts";

/** `{data_dir}/state/{name}`. */
export function stateFilePath(io: Pick<EnforcerIO, "config">, name: string): string {
  return `${io.config.enrollment.dataDir}/state/${name}`;
}

/** The name of the Flatpak enforcer's record of what svc installed. */
export const FLATPAK_STATE_FILE = "flatpak.json";

/** `{data_dir}/state/flatpak.json`. */
export function flatpakStatePath(io: Pick<EnforcerIO, "config">): string {
  return stateFilePath(io, FLATPAK_STATE_FILE);
}
