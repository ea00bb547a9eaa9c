/**
 * The enforcers this agent ships, keyed by policy type wire name. A type missing here is
 * reported NON_COMPLIANT "unsupported policy type" by the sync engine.
 *
 * @module
 */

import type { Enforcer } from "../sync/types.ts";
import { chromeEnforcer } from "./chrome.ts";
import { dconfEnforcer } from "./dconf.ts";
import { edgeEnforcer } from "./edge.ts";
import { firefoxEnforcer } from "./firefox.ts";
import { firewalldEnforcer } from "./firewalld.ts";
import { polkitEnforcer } from "./polkit.ts";
import { kconfigEnforcer } from "./kconfig.ts";
import { flatpakEnforcer } from "./flatpak.ts";
import { sessionAccessEnforcer } from "./session_access.ts";
import { thunderbirdEnforcer } from "./thunderbird.ts";
import { diskEncryptionEnforcer } from "../disk_encryption/enforcer.ts";

/** Every enforcer of this build. */
export const ENFORCERS: readonly Enforcer[] = [
  firefoxEnforcer,
  thunderbirdEnforcer,
  chromeEnforcer,
  edgeEnforcer,
  firewalldEnforcer,
  polkitEnforcer,
  dconfEnforcer,
  kconfigEnforcer,
  flatpakEnforcer,
  sessionAccessEnforcer,
  diskEncryptionEnforcer,
];

/** A fresh registry: wire name → enforcer. */
export function enforcerRegistry(enforcers: readonly Enforcer[] = ENFORCERS): Map<string, Enforcer> {
  return new Map(enforcers.map((e) => [e.type, e]));
}
