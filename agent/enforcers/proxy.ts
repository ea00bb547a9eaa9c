/**
 * Proxy enforcer: one proxy configuration wherever a desktop reads one.
 *
 * 1. Every policy is parsed and checked again with the shared rules (server data is untrusted).
 * 2. The first valid policy in the engine's order (highest priority) applies whole; the others report
 *    INAPPLICABLE naming it (or share its results when they ask for the same configuration).
 * 3. Files (each through the managed-file store: atomic, original backed up and put back when no policy needs
 *    it, tamper-watched), rendered from `proxy/settings.ts` by `proxy/system_files.ts` and `proxy/desktops.ts`:
 *    - `/etc/environment`: a marked block at the end (pam_env reads it for every PAM session, graphical or
 *      not, whatever the shell; later lines win, so the block wins over older lines). `/etc/profile.d` would
 *      reach login shells only (not fish, not programs started without a login shell);
 *    - `/etc/apt/apt.conf.d/80svc-proxy` where apt is installed;
 *    - `/etc/dnf/dnf.conf` where dnf is installed: a marked block at the end of `[main]`; a `proxy=` line of the
 *      original is commented out while svc manages the file (the original comes back on release);
 *    - GNOME: `org.gnome.system.proxy` keys, locked, through the Dconf type's renderer, compiler and reader
 *      (`dconf/`): keyfile `svc-proxy` in the `local` database, and the `user` profile listing it when it does
 *      not yet;
 *    - KDE: `[Proxy Settings]` in `/etc/xdg/kioslaverc`, immutable, read back with the Kconfig type's reader.
 *    The browsers get the configuration through their own policy files (Firefox's `Proxy`, locked; the
 *    Chromium family's `ProxyMode`, `ProxyServer`, `ProxyPacUrl`, `ProxyBypassList`), written by the Firefox
 *    and Chrome enforcers, which run first (`Enforcer.companions`).
 * 4. A PAC URL reaches GNOME, KDE and the browsers; the environment, apt and dnf cannot read a PAC file, so
 *    their items are INAPPLICABLE and nothing of theirs is written.
 * 5. Read-back (`proxy/read_back.ts`): `/etc/environment` as pam_env reads it; apt's merged configuration
 *    (`apt-config dump`, so a later file that overrides svc's shows); dnf.conf's `[main]` as dnf reads it; what a
 *    GNOME session reads (`dconf dump`, `dconf list-locks`); what KDE reads (`kreadconfig5`); each installed
 *    browser's policy file. The items per place are `proxy/items.ts`'s.
 *
 * Credentials never reach any of these files: the shared rules refuse them in content (all of these files are
 * readable by every user). Everything is written mode 0644.
 *
 * @module
 */

import { proxyType } from "../../shared/policy_types/proxy.ts";
import type { ProxyPolicy } from "../../shared/gen/svc/policy/v1/proxy_pb.ts";
import type { EnforcerIO, ItemResult, PolicyResult } from "../sync/types.ts";
import { CHROME_BROWSERS } from "./chrome.ts";
import { DCONF_DB_DIR, isSvcDconfFile, profileWith, renderDconfFiles } from "./dconf/render.ts";
import { compileDatabases, precompile } from "./dconf/tool.ts";
import {
  type Checked,
  desktopEnforcer,
  overriddenBy,
  summarize,
  type SummaryWords,
} from "./desktop_enforcer.ts";
import { FIREFOX_INSTALL_PATHS } from "./firefox.ts";
import { KDE_INSTALL_PATHS } from "./kconfig.ts";
import {
  DCONF_KEYFILE,
  DCONF_LOCKS,
  DCONF_USER_PROFILE,
  GNOME_PROXY_SCHEMA,
  gnomePlanned,
  isOwnKioslaverc,
  kdeWants,
  keptProfile,
  KIOSLAVERC,
  kioslavercFile,
  LOCAL_DB,
  LOCAL_DB_SOURCES,
} from "./proxy/desktops.ts";
import { sameJson, targetItems } from "./proxy/items.ts";
import { present, type ProxyPlan, type ProxySeen, readBack } from "./proxy/read_back.ts";
import { aptOptions, dnfProxy, environmentLines, proxyConfig, proxyContent } from "./proxy/settings.ts";
import {
  APT_FILE,
  aptFile,
  DNF_CONF,
  dnfConfFile,
  ENVIRONMENT,
  environmentFile,
} from "./proxy/system_files.ts";

/** The files of the highest-priority valid policy's configuration, on the targets this node has. */
async function plan(valid: Checked<ProxyPolicy>[], io: EnforcerIO): Promise<ProxyPlan> {
  const first = valid[0];
  const found = await present(io);
  const files = new Map<string, string>();
  if (!first) {
    for (const [path, text] of await keptProfile(io)) files.set(path, text);
    return { files, present: found, gnome: undefined, kde: [] };
  }
  const config = proxyConfig(first.message);
  const env = environmentLines(config);
  if (env) files.set(ENVIRONMENT, environmentFile(await io.fs.readTextFile(ENVIRONMENT), env));
  const apt = aptOptions(config);
  if (apt && found.apt) files.set(APT_FILE, aptFile(apt));
  const dnf = dnfProxy(config);
  if (dnf && found.dnf) files.set(DNF_CONF, dnfConfFile(await io.fs.readTextFile(DNF_CONF), dnf));
  let gnome: ProxyPlan["gnome"];
  if (found.gnome) {
    gnome = renderDconfFiles(gnomePlanned(first.policy, config));
    files.set(DCONF_KEYFILE, gnome.keyfile);
    files.set(DCONF_LOCKS, gnome.locks);
    const profile = await io.fs.readTextFile(DCONF_USER_PROFILE);
    const next = profileWith(profile, "local");
    if (next !== undefined || io.managedPaths().includes(DCONF_USER_PROFILE)) {
      files.set(DCONF_USER_PROFILE, next ?? profile!);
    }
  } else for (const [path, text] of await keptProfile(io)) files.set(path, text);
  const kde = found.kde ? kdeWants(first.policy, config) : [];
  if (kde.length) files.set(KIOSLAVERC, kioslavercFile(kde));
  return { files, winner: { policy: first.policy, config }, present: found, gnome, kde };
}

const WORDS: SummaryWords = {
  inEffect: (ok, skipped) =>
    `proxy in effect in ${ok} place(s)` + (skipped ? `; ${skipped} not applicable` : ""),
  none: "target",
  noun: "place(s)",
  label: (i) => `${i.key} (${i.schemaId})`,
};

/** A policy asking for the winner's configuration shares its items; any other is overridden whole. */
function report(
  { policy, message }: Checked<ProxyPolicy>,
  plan: ProxyPlan,
  seen: ProxySeen,
  failed: Map<string, string>,
): Omit<PolicyResult, "policyId"> {
  const winner = plan.winner!;
  if (winner.policy !== policy && !sameJson(proxyConfig(message), winner.config)) {
    const items: ItemResult[] = [{
      schemaId: "proxy",
      key: "proxy",
      status: "INAPPLICABLE",
      message: overriddenBy(winner.policy),
    }];
    return { ...summarize(items, WORDS), items };
  }
  const items = targetItems(plan, seen, failed);
  return { ...summarize(items, WORDS), items };
}

/** The Proxy enforcer; see the module documentation. */
export const proxyEnforcer = desktopEnforcer<ProxyPolicy, ProxyPlan, ProxySeen>({
  type: proxyType.wireName,
  // Sessions read the environment and the desktop settings at login; browsers their policies at start.
  notifiesUsers: true,
  check: proxyContent,
  needs: [],
  reads: [
    "/etc/apt/apt.conf.d",
    "/etc/dnf",
    GNOME_PROXY_SCHEMA,
    "/usr/bin/dconf",
    ...KDE_INSTALL_PATHS,
    "/usr/bin/kreadconfig5",
    ...FIREFOX_INSTALL_PATHS,
    ...CHROME_BROWSERS.flatMap((b) => b.installPaths),
  ],
  isOwnContent: (text, path) =>
    path === APT_FILE || (path.startsWith(DCONF_DB_DIR) && isSvcDconfFile(text)) ||
    (path === KIOSLAVERC && isOwnKioslaverc(text)),
  plan,
  kept: keptProfile,
  async vet(io, plan) {
    if (!plan.gnome) return undefined;
    const problem = await precompile(io, plan.gnome.keyfile, plan.gnome.locks);
    return problem ? `dconf refused the proxy keyfile: ${problem}` : undefined;
  },
  transaction: {
    what: "the proxy files",
    async activate(io, plan, { changed }) {
      const dconf = changed.filter((p) => p.startsWith(DCONF_DB_DIR) || p === DCONF_USER_PROFILE);
      if (!plan.gnome && dconf.length && !(await io.fs.exists(LOCAL_DB_SOURCES))) {
        // The store removes a directory svc created once nothing is left in it: the compiled database was made
        // from svc's keyfile alone, and dconf would leave it behind.
        await io.fs.remove(LOCAL_DB);
        return undefined;
      }
      const databases = plan.gnome ? ["local"] : [];
      return dconf.length || plan.gnome ? await compileDatabases(io, databases, dconf) : undefined;
    },
    async reactivate(io) {
      // The restored files are compiled again, as if every one had changed.
      await compileDatabases(io, [], [DCONF_KEYFILE]).catch(() => undefined);
    },
    note: " (previous proxy files restored)",
    keepsChanges: true,
  },
  readBack: (io, plan) => readBack(io, plan),
  report: (checked, { plan, state, landed }) => report(checked, plan, state, landed.failed),
});
