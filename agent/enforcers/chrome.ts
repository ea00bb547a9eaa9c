/**
 * Chrome enforcer: the Chrome-family enforcer (chromium.ts) for Google Chrome and every Chromium
 * build found on the node (Debian `chromium`, `chromium-browser`, the Flatpak
 * org.chromium.Chromium); see the table in chromium.ts.
 *
 * @module
 */

import { chromeType } from "../../shared/policy_types/chrome.ts";
import type { Enforcer } from "../sync/types.ts";
import { browserEnforcer, type BrowserFamily } from "./browser_enforcer.ts";
import { chromiumCertificates } from "./certificates/anchors.ts";
import { type ChromiumBrowser, chromiumFamily } from "./chromium.ts";
import { chromiumProxy } from "./proxy/settings.ts";

const FLATPAK_CHROMIUM = "/var/lib/flatpak/app/org.chromium.Chromium";

/** The browsers of the Chrome type. */
export const CHROME_BROWSERS: readonly ChromiumBrowser[] = [
  {
    product: "Google Chrome",
    installPaths: ["/opt/google/chrome", "/opt/google/chrome-beta", "/opt/google/chrome-unstable"],
    managedDir: "/etc/opt/chrome/policies/managed",
    binaries: [
      "/opt/google/chrome/chrome",
      "/opt/google/chrome-beta/chrome",
      "/opt/google/chrome-unstable/chrome",
    ],
    chromium: false,
  },
  {
    product: "Chromium",
    installPaths: ["/usr/lib/chromium", "/usr/lib64/chromium", "/usr/bin/chromium"],
    managedDir: "/etc/chromium/policies/managed",
    binaries: ["/usr/lib/chromium/chromium", "/usr/lib64/chromium/chromium"],
    chromium: true,
  },
  {
    product: "Chromium (chromium-browser)",
    installPaths: [
      "/usr/lib/chromium-browser",
      "/usr/lib64/chromium-browser",
      "/usr/bin/chromium-browser",
      "/snap/bin/chromium",
    ],
    managedDir: "/etc/chromium-browser/policies/managed",
    binaries: [
      "/usr/lib/chromium-browser/chromium-browser",
      "/usr/lib64/chromium-browser/chromium-browser",
      "/snap/chromium/current/usr/lib/chromium-browser/chrome",
    ],
    chromium: true,
  },
  {
    product: "Flatpak Chromium",
    installPaths: [FLATPAK_CHROMIUM],
    managedDir:
      "/var/lib/flatpak/extension/org.chromium.Chromium.Extension.system-policies/{arch}/1/policies/managed",
    binaries: [`${FLATPAK_CHROMIUM}/current/active/files/chromium/chromium`],
    chromium: true,
  },
];

/**
 * The browsers of the Chrome type and the files they read; those files also carry the trusted CAs of the
 * Certificates type (CACertificates) and the Proxy type's proxy.
 */
export const chromeFamily: BrowserFamily = chromiumFamily(chromeType, "Chrome or Chromium", CHROME_BROWSERS, [
  chromiumCertificates,
  chromiumProxy,
]);

/** The Chrome enforcer. */
export const chromeEnforcer: Enforcer = browserEnforcer(chromeFamily);
