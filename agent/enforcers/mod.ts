/**
 * The enforcers this agent ships, keyed by policy type wire name. A type missing here is
 * reported NON_COMPLIANT "unsupported policy type" by the sync engine. Each line names the module that
 * loads on first use of the type (see lazy.ts) and the traits the engine reads before that.
 *
 * @module
 */

import type { Enforcer } from "../sync/types.ts";
import { type LazyEnforcer, lazyEnforcer as lazy, NOTIFIES, QUIET } from "./lazy.ts";
import { flatpakStatePath } from "./flatpak_state.ts";
import { fileExists } from "../fs.ts";

/** Fresh stand-ins of every enforcer of this build, none of them loaded yet. */
export function lazyEnforcers(): LazyEnforcer[] {
  return [
    lazy("Firefox", () => import("./firefox.ts"), "firefoxEnforcer", NOTIFIES),
    lazy("Thunderbird", () => import("./thunderbird.ts"), "thunderbirdEnforcer", NOTIFIES),
    lazy("Chrome", () => import("./chrome.ts"), "chromeEnforcer", NOTIFIES),
    lazy("Edge", () => import("./edge.ts"), "edgeEnforcer", NOTIFIES),
    lazy("Firewalld", () => import("./firewalld.ts"), "firewalldEnforcer", QUIET),
    lazy("Polkit", () => import("./polkit.ts"), "polkitEnforcer", QUIET),
    lazy("Dconf", () => import("./dconf.ts"), "dconfEnforcer", QUIET),
    lazy("Kconfig", () => import("./kconfig.ts"), "kconfigEnforcer", NOTIFIES),
    lazy("Flatpak", () => import("./flatpak.ts"), "flatpakEnforcer", {
      ...QUIET,
      background: true,
      // What svc installed is recorded in the state file; without it there is nothing to take back.
      residue: (io) => fileExists(flatpakStatePath(io)),
    }),
    lazy("SessionAccess", () => import("./session_access.ts"), "sessionAccessEnforcer", {
      ...QUIET,
      // The residue is the running lock timer.
      residue: "when loaded",
    }),
    lazy("DiskEncryption", () => import("../disk_encryption/enforcer.ts"), "diskEncryptionEnforcer", {
      ...QUIET,
      background: true,
    }),
    lazy("Privilege", () => import("./privilege.ts"), "privilegeEnforcer", QUIET),
    // Scripts run for up to an hour each: their own lane, so nothing else waits for them.
    lazy("Scripts", () => import("./scripts.ts"), "scriptsEnforcer", { ...QUIET, background: true }),
  ];
}

/** Every enforcer of this build. */
export const ENFORCERS: readonly Enforcer[] = lazyEnforcers();

/** A fresh registry: wire name → enforcer. */
export function enforcerRegistry(enforcers: readonly Enforcer[] = ENFORCERS): Map<string, Enforcer> {
  return new Map(enforcers.map((e) => [e.type, e]));
}
