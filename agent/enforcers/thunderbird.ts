/**
 * Thunderbird enforcer: the Mozilla-family enforcer (mozilla.ts) with Thunderbird's paths. The
 * system file is `/etc/thunderbird/policies/policies.json` (Thunderbird's SysConfD); Flathub
 * publishes Thunderbird as org.mozilla.Thunderbird and as net.thunderbird.Thunderbird, and the
 * file goes into the `<app id>.systemconfig` extension of whichever is installed.
 *
 * @module
 */

import { thunderbirdType } from "../../shared/policy_types/thunderbird.ts";
import type { Enforcer } from "../sync/types.ts";
import { mozillaEnforcer, systemconfigFlatpak } from "./mozilla.ts";

/** Where a system Thunderbird lives (node paths); any one present means "installed". */
export const THUNDERBIRD_INSTALL_PATHS: readonly string[] = [
  "/usr/lib/thunderbird",
  "/usr/lib64/thunderbird",
  "/opt/thunderbird",
  "/usr/bin/thunderbird",
];

/** System policies file of Thunderbird (node path). */
export const THUNDERBIRD_POLICIES_PATH = "/etc/thunderbird/policies/policies.json";

const FLATPAKS = [
  systemconfigFlatpak("org.mozilla.Thunderbird", "thunderbird"),
  systemconfigFlatpak("net.thunderbird.Thunderbird", "thunderbird"),
];

/** The Thunderbird enforcer. */
export const thunderbirdEnforcer: Enforcer = mozillaEnforcer({
  def: thunderbirdType,
  product: "Thunderbird",
  installPaths: THUNDERBIRD_INSTALL_PATHS,
  systemPath: () => THUNDERBIRD_POLICIES_PATH,
  flatpaks: () => FLATPAKS,
});
