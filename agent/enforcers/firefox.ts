/**
 * Firefox enforcer: the Mozilla-family enforcer (mozilla.ts) with Firefox's paths. The system
 * file is `firefox.policies_path` of the agent configuration (default
 * `/etc/firefox/policies/policies.json`, read by distribution builds including firefox-esr,
 * whose application name is still "Firefox"); the Flatpak file is
 * `firefox.flatpak_policies_path` when the Flatpak org.mozilla.firefox is installed.
 *
 * @module
 */

import { firefoxType } from "../../shared/policy_types/firefox.ts";
import type { Enforcer } from "../sync/types.ts";
import { browserEnforcer, type BrowserFamily } from "./browser_enforcer.ts";
import { firefoxCertificates } from "./certificates/anchors.ts";
import { FLATPAK, MOZILLA_MARKER_KEY, mozillaFamily } from "./mozilla.ts";
import { firefoxProxy } from "./proxy/settings.ts";

/** Top-level key of svc's `policies.json` that marks the file as managed (Firefox ignores it). */
export const FIREFOX_MARKER_KEY: string = MOZILLA_MARKER_KEY;

/** Where a system Firefox lives (node paths); any one present means "installed". */
export const FIREFOX_INSTALL_PATHS: readonly string[] = [
  "/usr/lib/firefox",
  "/usr/lib/firefox-esr",
  "/usr/lib64/firefox",
  "/usr/lib64/firefox-esr",
  "/opt/firefox",
  "/usr/bin/firefox",
];

/** Where Firefox is installed and which files it reads; its policies file also carries the trusted CAs of the
 * Certificates type and the Proxy type's proxy. */
export const firefoxFamily: BrowserFamily = mozillaFamily({
  def: firefoxType,
  product: "Firefox",
  installPaths: FIREFOX_INSTALL_PATHS,
  systemPath: (io) => io.config.firefox.policiesPath,
  flatpaks: (io) => [{
    id: "org.mozilla.firefox",
    policiesPath: io.config.firefox.flatpakPoliciesPath,
    appDir: `${FLATPAK}/app/org.mozilla.firefox/current/active/files/lib/firefox`,
  }],
  companions: [firefoxCertificates, firefoxProxy],
});

/** The Firefox enforcer. */
export const firefoxEnforcer: Enforcer = browserEnforcer(firefoxFamily);
