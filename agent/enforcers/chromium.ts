/**
 * The Chrome family: Google Chrome, Chromium (Debian `chromium`, `chromium-browser`, the Flatpak
 * `org.chromium.Chromium`) for the Chrome type (chrome.ts), and Microsoft Edge for the Edge type
 * (edge.ts). Each
 * reads every file in its `policies/managed` directory; svc writes {@linkcode CHROMIUM_FILE_NAME}
 * there. The file is the plain policy object: Chrome reports unknown keys, so there is no marker
 * key; the `svc_` file-name prefix marks it instead.
 *
 * | Browser | Installed when one exists | Directory |
 * |---|---|---|
 * | Google Chrome | /opt/google/chrome, -beta, -unstable | /etc/opt/chrome/policies/managed |
 * | Chromium | /usr/lib/chromium, /usr/lib64/chromium, /usr/bin/chromium | /etc/chromium/policies/managed |
 * | chromium-browser | /usr/lib/chromium-browser, /usr/lib64/chromium-browser, /usr/bin/chromium-browser, /snap/bin/chromium | /etc/chromium-browser/policies/managed |
 * | Flatpak Chromium | /var/lib/flatpak/app/org.chromium.Chromium | /var/lib/flatpak/extension/org.chromium.Chromium.Extension.system-policies/{arch}/1/policies/managed |
 * | Microsoft Edge | /opt/microsoft/msedge, -beta, -dev | /etc/opt/edge/policies/managed |
 *
 * The Flatpak directory is an "unmanaged extension" of the extension point
 * `org.chromium.Chromium.Extension` (version 1), whose `policies/managed` subdirectory the Flathub
 * build merges into its policy directory.
 *
 * Effective state, per directory: the loader merges the files in byte order of their names and
 * the **last** file wins a key (verified with Debian's Chromium, see
 * tests/agent/browser_chromium_test.ts), so a key that a file sorting after ours sets to another
 * value is NON_COMPLIANT naming that file; a key the browser binary does not contain is
 * NON_COMPLIANT as unknown to that version (see `known_policies.ts`). Settings the catalogue marks
 * `chromeOnly` are not written for Chromium (INAPPLICABLE there).
 *
 * Merge: lists of URL patterns and extension ids are additive (ExtensionInstallForcelist entries
 * are one per extension id: the higher-priority entry wins), ExtensionSettings merges per
 * extension id, everything else is replaced by the highest priority.
 *
 * @module
 */

import type { BrowserTypeDef } from "../../shared/policy_types/browser.ts";
import { flatpakArch } from "../config.ts";
import { canonicalJson } from "../sync/key_merge.ts";
import type { Enforcer, EnforcerIO } from "../sync/types.ts";
import {
  anyExists,
  type BrowserCompanion,
  browserEnforcer,
  type BrowserFamily,
  type BrowserTarget,
  firstExisting,
} from "./browser_enforcer.ts";
import { chromiumKnownPolicies } from "./known_policies.ts";

/** Name of svc's file in each managed-policy directory. */
export const CHROMIUM_FILE_NAME = "svc_policies.json";

/** One Chrome-family browser build and where it reads managed policies. */
export interface ChromiumBrowser {
  /** Name for messages, e.g. `Chromium`. */
  product: string;
  /** Node paths; any one present means "installed". */
  installPaths: readonly string[];
  /** Managed-policy directory (node path); `{arch}` is replaced by the Flatpak architecture. */
  managedDir: string;
  /** Candidate main binaries (node paths), for the known-policy check. */
  binaries: readonly string[];
  /** Chromium builds leave out settings the catalogue marks Chrome-only. */
  chromium: boolean;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

const encoder = new TextEncoder();

/** Byte-order comparison of file names, as the policy loader sorts them. */
function sortsAfter(a: string, b: string): boolean {
  const x = encoder.encode(a);
  const y = encoder.encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] > y[i];
  return x.length > y.length;
}

/**
 * Keys of `values` that managed files sorting after svc's file in `dir` set to another value, with
 * the last such file (the one the browser uses).
 */
export async function overriddenKeys(
  io: EnforcerIO,
  dir: string,
  values: Record<string, unknown>,
): Promise<Map<string, string>> {
  const winners = new Map<string, string>();
  const later = (await io.fs.readDir(dir)).filter((name) => sortsAfter(name, CHROMIUM_FILE_NAME));
  for (const name of later) {
    const path = `${dir}/${name}`;
    const info = await io.fs.stat(path).catch(() => undefined);
    if (!info?.isFile) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(await io.fs.readTextFile(path) ?? "");
    } catch {
      continue; // the loader skips files that are not JSON objects, and so do we
    }
    if (!isObject(parsed)) continue;
    for (const [key, value] of Object.entries(values)) {
      if (Object.hasOwn(parsed, key) && canonicalJson(parsed[key]) !== canonicalJson(value)) {
        winners.set(key, path);
      } else if (Object.hasOwn(parsed, key)) winners.delete(key);
    }
  }
  return winners;
}

function chromiumTarget(browser: ChromiumBrowser, def: BrowserTypeDef): BrowserTarget {
  const dir = browser.managedDir.replaceAll("{arch}", flatpakArch());
  return {
    path: `${dir}/${CHROMIUM_FILE_NAME}`,
    product: browser.product,
    render: (keys) => `${JSON.stringify(keys, null, 2)}\n`,
    readBack(text) {
      try {
        const parsed = JSON.parse(text);
        return isObject(parsed) ? parsed : "the file is not a JSON object";
      } catch {
        return "the file is not valid JSON";
      }
    },
    isOwnContent: () => true, // the svc_ file name is the marker
    omitted: (key) =>
      browser.chromium && def.fieldInfo[key]?.chromeOnly
        ? `${key} is a Google Chrome policy that ${browser.product} does not support; not written for it`
        : undefined,
    async effective(io, values) {
      const reasons = new Map<string, string>();
      for (const [key, file] of await overriddenKeys(io, dir, values)) {
        reasons.set(
          key,
          `overridden by ${file}, which sorts after ${CHROMIUM_FILE_NAME}; ${browser.product} uses the value of the last file`,
        );
      }
      const binary = await firstExisting(io, browser.binaries);
      const known = binary
        ? await chromiumKnownPolicies(io, binary, browser.product, Object.keys(values))
        : undefined;
      for (const key of Object.keys(values)) {
        if (!reasons.has(key) && known && !known.knows(key)) {
          reasons.set(key, `${known.product} does not know the policy ${key} and ignores it`);
        }
      }
      return reasons;
    },
  };
}

function forcelistIdentity(key: string, item: unknown): string | undefined {
  return key === "ExtensionInstallForcelist" && typeof item === "string" ? item.split(";")[0] : undefined;
}

/** The enforcer of a Chromium-based policy type serving `browsers`; see the module documentation. */
export function chromiumEnforcer(
  def: BrowserTypeDef,
  product: string,
  browsers: readonly ChromiumBrowser[],
): Enforcer {
  return browserEnforcer(chromiumFamily(def, product, browsers));
}

/** The browser family of a Chromium-based policy type serving `browsers`, with other types' settings for them. */
export function chromiumFamily(
  def: BrowserTypeDef,
  product: string,
  browsers: readonly ChromiumBrowser[],
  companions?: readonly BrowserCompanion[],
): BrowserFamily {
  return {
    def,
    product,
    companions,
    itemIdentity: forcelistIdentity,
    installLocations: () => browsers.flatMap((b) => b.installPaths),
    async locate(io) {
      const targets: BrowserTarget[] = [];
      for (const browser of browsers) {
        if (await anyExists(io, browser.installPaths)) targets.push(chromiumTarget(browser, def));
      }
      return { targets, lookedFor: browsers.flatMap((b) => b.installPaths).join(", ") };
    },
  };
}
