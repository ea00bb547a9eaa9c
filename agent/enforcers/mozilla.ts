/**
 * The Mozilla family (Firefox and Thunderbird; see firefox.ts and thunderbird.ts): both read enterprise policies from `policies.json` in the system
 * configuration directory `/etc/<application name>/policies/` ("SysConfD", which takes
 * precedence over the copy in the installation's `distribution/` directory), and their Flatpak
 * builds from the file in the `<app id>.systemconfig` extension. The file is
 * `{"svc_managed": "…", "policies": {…}}`.
 *
 * Managed-by marker: Mozilla's JSON provider reads only the `policies` member of the file and
 * validates the names inside it against its schema, so an unknown key *inside* `policies` is
 * reported as an error while a sibling of `policies` is never looked at. The marker therefore
 * sits next to `policies`, as {@linkcode MOZILLA_MARKER_KEY}. svc also records the SHA-256 of
 * what it wrote in its state file, so an edited copy is still recognised.
 *
 * Effective state: each installed build's own policy list (its policies-schema.json, see
 * `known_policies.ts`) tells which written keys that version does not know; those are NON_COMPLIANT. A key
 * the version lists but does nothing with (no handler in its implementation, or inert per the catalogue) is
 * INAPPLICABLE with the reason: writing it is harmless, and it cannot take effect on this version.
 *
 * Merge: see the `merge` entries of the Firefox and Thunderbird catalogues in the shared registry
 * (ExtensionSettings and Preferences per entry; Extensions and Certificates lists, WebsiteFilter
 * lists and Bookmarks additive; everything else replaced by the highest priority).
 *
 * @module
 */

import type { BrowserTypeDef } from "../../shared/policy_types/browser.ts";
import { flatpakArch } from "../config.ts";
import type { Enforcer, EnforcerIO } from "../sync/types.ts";
import {
  anyExists,
  type BrowserCompanion,
  browserEnforcer,
  type BrowserFamily,
  type BrowserTarget,
  type EffectiveReasons,
} from "./browser_enforcer.ts";
import { type KnownPolicies, mozillaKnownPolicies } from "./known_policies.ts";

/** Top-level key of svc's `policies.json` that marks the file as managed (the application ignores it). */
export const MOZILLA_MARKER_KEY = "svc_managed";

/** A Flatpak build of the application. */
export interface FlatpakApp {
  /** Application id, e.g. `org.mozilla.firefox`. */
  id: string;
  /** Node path of the policies file; `{arch}` is replaced. */
  policiesPath: string;
  /** Installation directory inside the deployed app, holding omni.ja. */
  appDir: string;
}

/** Flatpak system installation (node path). */
export const FLATPAK = "/var/lib/flatpak";

/** The Flatpak app `id` with the policies file in its `<id>.systemconfig` extension; `appDir` under lib/. */
export function systemconfigFlatpak(id: string, appDir: string): FlatpakApp {
  return {
    id,
    policiesPath: `${FLATPAK}/extension/${id}.systemconfig/{arch}/stable/policies/policies.json`,
    appDir: `${FLATPAK}/app/${id}/current/active/files/lib/${appDir}`,
  };
}

const MARKER_TEXT = (product: string) =>
  `This file is managed by svc (svc-agent). Local changes are overwritten; ask your administrator to change the ${product} policy instead.`;

/** Renders the merged `policies` object into the file svc writes. */
export function renderMozillaPolicies(policies: Record<string, unknown>, product = "Firefox"): string {
  return `${JSON.stringify({ [MOZILLA_MARKER_KEY]: MARKER_TEXT(product), policies }, null, 2)}\n`;
}

/** Whether a `policies.json` text is svc's own (carries the marker). */
export function isSvcMozillaFile(text: string): boolean {
  try {
    const parsed = JSON.parse(text);
    return parsed !== null && typeof parsed === "object" && Object.hasOwn(parsed, MOZILLA_MARKER_KEY);
  } catch {
    return false;
  }
}

function readPolicies(text: string): Record<string, unknown> | string {
  try {
    const parsed = JSON.parse(text);
    return parsed?.policies && typeof parsed.policies === "object" && !Array.isArray(parsed.policies)
      ? parsed.policies
      : 'the file has no "policies" object';
  } catch {
    return "the file is not valid JSON";
  }
}

function mozillaTarget(
  path: string,
  build: { product: string; app: string },
  appDirs: readonly string[],
): BrowserTarget {
  const product = build.product;
  return {
    path,
    product,
    render: (keys) => renderMozillaPolicies(keys, build.app),
    readBack: readPolicies,
    isOwnContent: isSvcMozillaFile,
    async effective(io: EnforcerIO, values: Record<string, unknown>) {
      const reasons: EffectiveReasons = new Map();
      const builds: KnownPolicies[] = [];
      for (const dir of appDirs) {
        const known = await mozillaKnownPolicies(io, dir, product);
        if (known) builds.push(known);
      }
      for (const key of Object.keys(values)) {
        const ignoring = builds.find((b) => !b.knows(key));
        if (ignoring) {
          reasons.set(
            key,
            `${ignoring.product} does not know the policy ${key} (not in its ${ignoring.source} schema) and ignores it`,
          );
          continue;
        }
        const inert = builds.map((b) => b.inert?.(key)).find((reason) => reason !== undefined);
        if (inert) reasons.set(key, { inapplicable: inert });
      }
      return reasons;
    },
  };
}

/** What {@linkcode mozillaEnforcer} needs to know about one application. */
export interface MozillaProduct {
  /** The shared policy type. */
  def: BrowserTypeDef;
  /** Application name, e.g. `Firefox`. */
  product: string;
  /** Node paths; any one present means "installed" (directories also hold omni.ja). */
  installPaths: readonly string[];
  /** System policies file (node path). */
  systemPath(io: EnforcerIO): string;
  /** The application's Flatpak builds. */
  flatpaks(io: EnforcerIO): FlatpakApp[];
  /** Other types whose settings go into the application's policies file. */
  companions?: readonly BrowserCompanion[];
}

/** The enforcer of a Mozilla application; see the module documentation. */
export function mozillaEnforcer(spec: MozillaProduct): Enforcer {
  return browserEnforcer(mozillaFamily(spec));
}

/** The browser family of a Mozilla application: where it is installed and which files it reads. */
export function mozillaFamily(spec: MozillaProduct): BrowserFamily {
  return {
    def: spec.def,
    product: spec.product,
    companions: spec.companions,
    installLocations: (io) => [
      ...spec.installPaths,
      ...spec.flatpaks(io).flatMap((app) => [`${FLATPAK}/app/${app.id}`, app.appDir]),
    ],
    async locate(io) {
      const targets: BrowserTarget[] = [];
      if (await anyExists(io, spec.installPaths)) {
        const appDirs = spec.installPaths.filter((p) => !p.startsWith("/usr/bin/"));
        targets.push(
          mozillaTarget(spec.systemPath(io), { product: spec.product, app: spec.product }, appDirs),
        );
      }
      for (const app of spec.flatpaks(io)) {
        if (await io.fs.exists(`${FLATPAK}/app/${app.id}`)) {
          const path = app.policiesPath.replaceAll("{arch}", flatpakArch());
          targets.push(
            mozillaTarget(path, { product: `Flatpak ${spec.product}`, app: spec.product }, [app.appDir]),
          );
        }
      }
      const lookedFor = `${spec.installPaths.join(", ")} and the Flatpak ${
        spec.flatpaks(io).map((f) => f.id).join(" or ")
      }`;
      return { targets, lookedFor };
    },
  };
}
