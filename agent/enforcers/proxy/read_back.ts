/**
 * Where each of the Proxy type's targets applies on the node, what the type lands there, and what each target's
 * program reads back: `/etc/environment` as pam_env reads it; apt's merged configuration; dnf.conf's `[main]` as
 * dnf reads it; what a GNOME session reads; what KDE reads; each installed browser's policy file.
 *
 * @module
 */

import type { CachedPolicy, EnforcerIO } from "../../sync/types.ts";
import { type BrowserView, browserViews } from "../browser_views.ts";
import { chromeFamily } from "../chrome.ts";
import { type DconfSession, readSession } from "../dconf/tool.ts";
import type { DesktopPlan } from "../desktop_enforcer.ts";
import { firefoxFamily } from "../firefox.ts";
import { KDE_INSTALL_PATHS } from "../kconfig.ts";
import { type KdeReading, readKdeKeys } from "../kconfig/read_back.ts";
import { GNOME_PROXY_SCHEMA, type KdeWant } from "./desktops.ts";
import type { ProxyConfig } from "./settings.ts";
import { DNF_CONF, ENVIRONMENT, parseDnfProxy, parseEnvironment, readApt } from "./system_files.ts";

/** Where each target applies on this node. */
export interface Present {
  apt: boolean;
  dnf: boolean;
  gnome: boolean;
  kde: boolean;
}

/** What the Proxy type lands. */
export interface ProxyPlan extends DesktopPlan {
  winner?: { policy: CachedPolicy; config: ProxyConfig };
  present: Present;
  gnome: { keyfile: string; locks: string } | undefined;
  kde: KdeWant[];
}

/** What the node's programs read. */
export interface ProxySeen {
  environment: Map<string, string> | string;
  apt: Map<string, string> | string | undefined;
  dnf: string | undefined;
  gnome: DconfSession | undefined;
  kde: Map<KdeWant, KdeReading>;
  firefox: BrowserView[];
  chromium: BrowserView[];
}

/** Which targets this node has. */
export async function present(io: EnforcerIO): Promise<Present> {
  let kde = false;
  for (const path of KDE_INSTALL_PATHS) kde ||= await io.fs.exists(path);
  return {
    apt: (await io.fs.stat("/etc/apt/apt.conf.d"))?.isDirectory === true,
    dnf: (await io.fs.stat("/etc/dnf"))?.isDirectory === true,
    gnome: await io.fs.exists(GNOME_PROXY_SCHEMA) && (await io.runner.which("dconf")) !== undefined,
    kde,
  };
}

/** What every target's program reads after the write. */
export async function readBack(io: EnforcerIO, plan: ProxyPlan): Promise<ProxySeen> {
  const envText = await io.fs.readTextFile(ENVIRONMENT).catch((err) => err as Error);
  const dnfText = plan.present.dnf ? await io.fs.readTextFile(DNF_CONF).catch(() => undefined) : undefined;
  return {
    environment: envText instanceof Error
      ? `cannot read ${ENVIRONMENT}: ${envText.message}`
      : parseEnvironment(envText ?? ""),
    apt: plan.present.apt
      ? (await io.runner.which("apt-config") ? await readApt(io) : "apt-config is not installed")
      : undefined,
    dnf: dnfText === undefined ? undefined : parseDnfProxy(dnfText),
    gnome: plan.gnome ? await readSession(io, "user") : undefined,
    kde: plan.kde.length ? await readKdeKeys(io, plan.kde) : new Map(),
    firefox: await browserViews(io, firefoxFamily, ["Proxy"]),
    chromium: await browserViews(io, chromeFamily, [
      "ProxyMode",
      "ProxyServer",
      "ProxyPacUrl",
      "ProxyBypassList",
    ]),
  };
}
