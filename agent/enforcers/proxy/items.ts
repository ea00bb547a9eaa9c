/**
 * The report items of the winning proxy configuration, one per place a desktop reads it: what the place should
 * read against what its program read back. A PAC URL reaches GNOME, KDE and the browsers only: the environment,
 * apt and dnf cannot read a PAC file, so their items are INAPPLICABLE.
 *
 * @module
 */

import type { ComplianceStatusName, ItemResult } from "../../sync/types.ts";
import type { BrowserView } from "../browser_views.ts";
import {
  DCONF_KEYFILE,
  GNOME_PROXY_SCHEMA,
  gnomePlanned,
  gnomeProblem,
  kdeProblem,
  KIOSLAVERC,
} from "./desktops.ts";
import type { ProxyPlan, ProxySeen } from "./read_back.ts";
import { aptOptions, chromiumProxyKeys, dnfProxy, environmentLines, firefoxProxyKey } from "./settings.ts";
import { APT_FILE, DNF_CONF, ENVIRONMENT } from "./system_files.ts";

/** Whether two values are the same JSON. */
export function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The items of the winning configuration, one per place a desktop reads it. */
export function targetItems(plan: ProxyPlan, seen: ProxySeen, failed: Map<string, string>): ItemResult[] {
  const { config } = plan.winner!;
  const items: ItemResult[] = [];
  const add = (key: string, schemaId: string, status: ComplianceStatusName, message: string) =>
    items.push({ schemaId, key, status, message });
  const noPac = (what: string) => `${what} cannot read a PAC file: set a manual proxy for it`;
  const compare = (
    key: string,
    file: string,
    want: Map<string, string>,
    got: Map<string, string> | string,
  ) => {
    const error = failed.get(file);
    if (error) return add(key, file, "ERROR", error);
    if (typeof got === "string") return add(key, file, "ERROR", got);
    const wrong = [...want].filter(([k, v]) => got.get(k) !== v);
    if (wrong.length === 0) return add(key, file, "COMPLIANT", `${want.size} setting(s) in effect`);
    const [k, v] = wrong[0];
    add(key, file, "NON_COMPLIANT", `${k}: expected ${v}, ${got.has(k) ? `read ${got.get(k)}` : "not set"}`);
  };

  const env = environmentLines(config);
  if (!env) add("environment", ENVIRONMENT, "INAPPLICABLE", noPac("the session environment"));
  else compare("environment", ENVIRONMENT, env, seen.environment);

  if (!plan.present.apt) {
    add("apt", APT_FILE, "INAPPLICABLE", "apt is not installed (no /etc/apt/apt.conf.d)");
  } else if (config.kind === "pac") add("apt", APT_FILE, "INAPPLICABLE", noPac("apt"));
  else compare("apt", APT_FILE, aptOptions(config)!, seen.apt!);

  const dnf = dnfProxy(config);
  if (!plan.present.dnf) add("dnf", DNF_CONF, "INAPPLICABLE", "dnf is not installed (no /etc/dnf)");
  else if (!dnf) add("dnf", DNF_CONF, "INAPPLICABLE", noPac("dnf"));
  else {
    const read = new Map(seen.dnf === undefined ? [] : [["proxy", seen.dnf]]);
    compare("dnf", DNF_CONF, new Map([["proxy", dnf]]), read);
  }

  if (!plan.gnome || !seen.gnome) {
    add(
      "GNOME",
      DCONF_KEYFILE,
      "INAPPLICABLE",
      `GNOME's proxy settings are not installed (no ${GNOME_PROXY_SCHEMA} or no dconf)`,
    );
  } else if (typeof seen.gnome === "string") {
    add("GNOME", DCONF_KEYFILE, "ERROR", seen.gnome);
  } else {
    const wrong = gnomeProblem(gnomePlanned(plan.winner!.policy, config), seen.gnome);
    if (wrong) add("GNOME", DCONF_KEYFILE, "NON_COMPLIANT", wrong);
    else add("GNOME", DCONF_KEYFILE, "COMPLIANT", "GNOME sessions use the proxy (locked)");
  }

  if (!plan.present.kde) add("KDE", KIOSLAVERC, "INAPPLICABLE", "KDE Plasma is not installed");
  else {
    const error = failed.get(KIOSLAVERC);
    const wrong = kdeProblem(plan.kde, seen.kde);
    if (error) add("KDE", KIOSLAVERC, "ERROR", error);
    else if (wrong) add("KDE", KIOSLAVERC, wrong.status, wrong.message);
    else add("KDE", KIOSLAVERC, "COMPLIANT", "KDE uses the proxy (immutable)");
  }

  const browsers = (views: BrowserView[], want: Record<string, unknown>) => {
    for (const view of views) {
      const where = view.target.path;
      const product = view.target.product;
      if (typeof view.keys === "string") {
        add(product, where, "ERROR", view.keys);
        continue;
      }
      const keys = view.keys;
      const wrong = Object.keys(want).find((k) => !sameJson(keys[k], want[k]));
      const ignored = Object.keys(want).map((k) => view.ignored.get(k)).find((r) => r);
      if (wrong) {
        // The browser types' own policies merge with the Proxy type's by priority in that file.
        add(
          product,
          where,
          Object.hasOwn(keys, wrong) ? "INAPPLICABLE" : "NON_COMPLIANT",
          Object.hasOwn(keys, wrong)
            ? `a higher-priority ${product} policy sets ${wrong} in ${where}`
            : `${wrong} is not in ${where}`,
        );
      } else if (ignored) add(product, where, "NON_COMPLIANT", ignored);
      else add(product, where, "COMPLIANT", `${product} uses the proxy`);
    }
  };
  browsers(seen.firefox, { Proxy: firefoxProxyKey(config) });
  browsers(seen.chromium, chromiumProxyKeys(config));
  return items;
}
