/**
 * The enforcers this agent ships, keyed by policy type wire name. A type missing here is
 * reported NON_COMPLIANT "unsupported policy type" by the sync engine. Each line names the module that
 * loads on first use of the type (see lazy.ts) and the traits the engine reads before that.
 *
 * @module
 */

import type { Enforcer } from "../sync/types.ts";
import { lazyEnforcer as lazy, NOTIFIES, QUIET } from "./lazy.ts";

/** Every enforcer of this build. */
export const ENFORCERS: readonly Enforcer[] = [
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
    residue: true,
  }),
  lazy("SessionAccess", () => import("./session_access.ts"), "sessionAccessEnforcer", {
    ...QUIET,
    residue: true,
  }),
  lazy("DiskEncryption", () => import("../disk_encryption/enforcer.ts"), "diskEncryptionEnforcer", {
    ...QUIET,
    background: true,
  }),
];

/** A fresh registry: wire name → enforcer. */
export function enforcerRegistry(enforcers: readonly Enforcer[] = ENFORCERS): Map<string, Enforcer> {
  return new Map(enforcers.map((e) => [e.type, e]));
}
