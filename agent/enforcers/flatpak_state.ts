/**
 * Where the Flatpak enforcer records what svc installed. Its own module so the registry can tell whether
 * there is anything to take back without loading the enforcer (see lazy.ts).
 *
 * @module
 */

import type { EnforcerIO } from "../sync/types.ts";

/** `{data_dir}/state/flatpak.json`. */
export function flatpakStatePath(io: Pick<EnforcerIO, "config">): string {
  return `${io.config.enrollment.dataDir}/state/flatpak.json`;
}
