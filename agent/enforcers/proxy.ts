/**
 * Proxy enforcer: one proxy configuration wherever a desktop reads one.
 *
 * 1. Every policy is parsed and checked again with the shared rules (server data is untrusted).
 * 2. The first valid policy in the engine's order (highest priority) applies whole; the others report
 *    INAPPLICABLE naming it (or share its results when they ask for the same configuration).
 * 3. Files (each through the managed-file store: atomic, original backed up and put back when no policy needs
 *    it, tamper-watched), rendered by `proxy_settings.ts`:
 *    - `/etc/environment`: a marked block at the end (pam_env reads it for every PAM session, graphical or
 *      not, whatever the shell; later lines win, so the block wins over older lines). `/etc/profile.d` would
 *      reach login shells only (not fish, not programs started without a login shell);
 *    - `/etc/apt/apt.conf.d/80svc-proxy` where apt is installed;
 *    - `/etc/dnf/dnf.conf` where dnf is installed: a marked block at the end of `[main]`; a `proxy=` line of the
 *      original is commented out while svc manages the file (the original comes back on release);
 *    - GNOME: `org.gnome.system.proxy` keys, locked, through the Dconf type's renderer, compiler and reader
 *      (`dconf.ts`): keyfile `svc-proxy` in the `local` database, and the `user` profile listing it when it does
 *      not yet;
 *    - KDE: `[Proxy Settings]` in `/etc/xdg/kioslaverc`, immutable, read back with the Kconfig type's reader.
 *    The browsers get the configuration through their own policy files (Firefox's `Proxy`, locked; the
 *    Chromium family's `ProxyMode`, `ProxyServer`, `ProxyPacUrl`, `ProxyBypassList`), written by the Firefox
 *    and Chrome enforcers, which run first (`Enforcer.companions`).
 * 4. A PAC URL reaches GNOME, KDE and the browsers; the environment, apt and dnf cannot read a PAC file, so
 *    their items are INAPPLICABLE and nothing of theirs is written.
 * 5. Read-back: `/etc/environment` as pam_env reads it; apt's merged configuration (`apt-config dump`, so a later
 *    file that overrides svc's shows); dnf.conf's `[main]` as dnf reads it; what a GNOME session reads
 *    (`dconf dump`, `dconf list-locks`); what KDE reads (`kreadconfig5`); each installed browser's policy file.
 *
 * Credentials never reach any of these files: the shared rules refuse them in content (all of these files are
 * readable by every user). Everything is written mode 0644.
 *
 * @module
 */

import { proxyType } from "../../shared/policy_types/proxy.ts";
import type { ProxyPolicy } from "../../shared/gen/svc/policy/v1/proxy_pb.ts";
import { formatGVariant, type GValue, gvariantEquals, parseGVariant } from "../../shared/gvariant.ts";
import { renderKconfigFile } from "../../shared/kconfig_format.ts";
import type {
  CachedPolicy,
  ComplianceStatusName,
  EnforcerIO,
  ItemResult,
  PolicyResult,
} from "../sync/types.ts";
import { type BrowserView, browserViews } from "./browser_views.ts";
import { CHROME_BROWSERS, chromeFamily } from "./chrome.ts";
import {
  DCONF_DB_DIR,
  DCONF_PROFILE_DIR,
  type DconfKey,
  dconfKeyfilePath,
  isSvcDconfFile,
  profileWith,
  renderDconfFiles,
} from "./dconf/render.ts";
import { compileDatabases, precompile, readSession } from "./dconf/tool.ts";
import {
  type Checked,
  desktopEnforcer,
  type DesktopPlan,
  overriddenBy,
  summarize,
  type SummaryWords,
} from "./desktop_enforcer.ts";
import { FIREFOX_INSTALL_PATHS, firefoxFamily } from "./firefox.ts";
import { KDE_INSTALL_PATHS } from "./kconfig.ts";
import { readKdeKeys as readKde } from "./kconfig/read_back.ts";
import type { KdeKey } from "./kconfig/render.ts";
import {
  aptOptions,
  chromiumProxyKeys,
  dnfProxy,
  environmentLines,
  firefoxProxyKey,
  gnomeKeys,
  kdeKeys,
  type ProxyConfig,
  proxyConfig,
  proxyContent,
} from "./proxy_settings.ts";

/** Node paths svc writes. */
export const ENVIRONMENT = "/etc/environment";
export const APT_FILE = "/etc/apt/apt.conf.d/80svc-proxy";
export const DNF_CONF = "/etc/dnf/dnf.conf";
const LOCAL_DB = `${DCONF_DB_DIR}/local`;
const LOCAL_DB_SOURCES = `${LOCAL_DB}.d`;
export const DCONF_KEYFILE = `${LOCAL_DB_SOURCES}/svc-proxy`;
export const DCONF_LOCKS = `${LOCAL_DB_SOURCES}/locks/svc-proxy`;
export const DCONF_USER_PROFILE = `${DCONF_PROFILE_DIR}/user`;
export const KIOSLAVERC = "/etc/xdg/kioslaverc";
/** The GNOME schema of the proxy keys (node path): GNOME's proxy applies where it is installed. */
export const GNOME_PROXY_SCHEMA = "/usr/share/glib-2.0/schemas/org.gnome.system.proxy.gschema.xml";

const BEGIN = "# BEGIN svc proxy (managed by svc-agent; change the Proxy policy instead)";
const END = "# END svc proxy";
const REPLACED = "# replaced by svc's Proxy policy: ";
const APT_HEADER =
  "// Managed by svc (svc-agent). Local changes are overwritten; change the Proxy policy instead.";
const KDE_HEADER =
  "Managed by svc (svc-agent). Local changes are overwritten; change the Proxy policy instead.";
const KDE_GROUP = "Proxy Settings";

/** `text` without svc's marked block. */
export function withoutBlock(text: string): string {
  const lines = text.split("\n");
  const begin = lines.indexOf(BEGIN);
  const end = lines.indexOf(END, begin);
  if (begin < 0 || end < 0) return text;
  return [...lines.slice(0, begin), ...lines.slice(end + 1)].join("\n");
}

function block(lines: string[]): string {
  return `${BEGIN}\n${lines.join("\n")}\n${END}\n`;
}

/** `/etc/environment` with svc's block at the end. */
export function environmentFile(current: string | undefined, vars: Map<string, string>): string {
  const rest = withoutBlock(current ?? "");
  const body = rest === "" || rest.endsWith("\n") ? rest : `${rest}\n`;
  return body + block([...vars].map(([k, v]) => `${k}=${v}`));
}

/**
 * The variables of an environment file as pam_env reads them: `KEY=VALUE` lines (an `export ` prefix and one pair
 * of surrounding quotes allowed), comments and blank lines skipped, the last assignment winning.
 */
export function parseEnvironment(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const raw of text.split("\n")) {
    const line = raw.trim().replace(/^export\s+/, "");
    if (line === "" || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) continue;
    let value = line.slice(eq + 1);
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.at(-1) === value[0]) {
      value = value.slice(1, -1);
    }
    out.set(line.slice(0, eq), value);
  }
  return out;
}

/** Index of the line that ends the `[main]` section (the next section header, or the end). */
function mainSection(lines: string[]): { start: number; end: number } | undefined {
  const start = lines.findIndex((l) => /^\s*\[main\]\s*$/.test(l));
  if (start < 0) return undefined;
  let end = lines.findIndex((l, i) => i > start && /^\s*\[.*\]\s*$/.test(l));
  if (end < 0) end = lines.length;
  while (end > start + 1 && lines[end - 1].trim() === "") end--;
  return { start, end };
}

const PROXY_OPTION = /^\s*proxy\s*[=:]/;

/**
 * dnf.conf with `proxy=<url>` in a marked block at the end of `[main]` (a `[main]` is added when there is none) and
 * any other `proxy` line of `[main]` commented out (dnf would otherwise read two values).
 */
export function dnfConfFile(current: string | undefined, proxy: string): string {
  const lines = withoutBlock(current ?? "").split("\n");
  if (lines.at(-1) === "") lines.pop();
  let main = mainSection(lines);
  if (!main) {
    lines.unshift("[main]");
    main = { start: 0, end: 1 };
  }
  for (let i = main.start + 1; i < main.end; i++) {
    if (PROXY_OPTION.test(lines[i])) lines[i] = `${REPLACED}${lines[i].trim()}`;
  }
  lines.splice(main.end, 0, ...block([`proxy=${proxy}`]).trimEnd().split("\n"));
  return `${lines.join("\n")}\n`;
}

/** dnf's `proxy` option as dnf reads `[main]` (the last value wins); undefined when not set. */
export function parseDnfProxy(text: string): string | undefined {
  const lines = text.split("\n");
  const main = mainSection(lines);
  let value: string | undefined;
  if (!main) return undefined;
  for (const line of lines.slice(main.start + 1, main.end)) {
    const m = /^\s*proxy\s*[=:]\s*(.*?)\s*$/.exec(line);
    if (m) value = m[1];
  }
  return value;
}

/** The apt configuration file. */
export function aptFile(options: Map<string, string>): string {
  return `${APT_HEADER}\n${[...options].map(([k, v]) => `${k} "${v}";`).join("\n")}\n`;
}

/** A GNOME key as the Dconf renderer takes it, with what its report item names. */
interface Planned extends DconfKey {
  policy: CachedPolicy;
  db: string;
  profile: string;
  schemaId: string;
  label: string;
}

/** A KDE key as the Kconfig reader takes it, with its report item. */
interface Want extends KdeKey {
  policy: CachedPolicy;
  itemFile: string;
  itemKey: string;
}

/** GNOME's keys as the Dconf renderer takes them. */
function gnomePlanned(policy: CachedPolicy, config: ProxyConfig): Planned[] {
  return [...gnomeKeys(config)].map(([path, { type, value }]) => {
    const at = path.lastIndexOf("/");
    const gvalue: GValue = type === "as"
      ? { type, value: (value as string[]).map((s): GValue => ({ type: "s", value: s })) }
      : { type, value } as GValue;
    return {
      policy,
      db: "local",
      profile: "user",
      schemaId: "org.gnome.system.proxy",
      key: path.slice(at + 1),
      label: path,
      dir: path.slice(0, at + 1),
      value: gvalue,
      lock: true,
    };
  });
}

/** KDE's keys as the Kconfig reader takes them. */
function kdeWants(policy: CachedPolicy, config: ProxyConfig): Want[] {
  return [...kdeKeys(config)].map(([key, value]) => ({
    policy,
    path: KIOSLAVERC,
    group: [KDE_GROUP],
    key,
    value,
    immutable: true,
    itemFile: "kioslaverc",
    itemKey: `[${KDE_GROUP}] ${key}`,
  }));
}

/** Where each target applies on this node. */
interface Present {
  apt: boolean;
  dnf: boolean;
  gnome: boolean;
  kde: boolean;
}

/** What the Proxy type lands. */
interface ProxyPlan extends DesktopPlan {
  winner?: { policy: CachedPolicy; config: ProxyConfig };
  present: Present;
  gnome: { keyfile: string; locks: string } | undefined;
  kde: Want[];
}

/** What the node's programs read. */
interface ProxySeen {
  environment: Map<string, string> | string;
  apt: Map<string, string> | string | undefined;
  dnf: string | undefined;
  gnome: Awaited<ReturnType<typeof readSession>> | undefined;
  kde: Map<Want, string | { value: string; immutable: boolean }>;
  firefox: BrowserView[];
  chromium: BrowserView[];
}

async function present(io: EnforcerIO): Promise<Present> {
  let kde = false;
  for (const path of KDE_INSTALL_PATHS) kde ||= await io.fs.exists(path);
  return {
    apt: (await io.fs.stat("/etc/apt/apt.conf.d"))?.isDirectory === true,
    dnf: (await io.fs.stat("/etc/dnf"))?.isDirectory === true,
    gnome: await io.fs.exists(GNOME_PROXY_SCHEMA) && (await io.runner.which("dconf")) !== undefined,
    kde,
  };
}

/** A profile line svc added for the proxy stays while the Dconf type's keys in the same database need it. */
async function keptProfile(io: EnforcerIO): Promise<Map<string, string>> {
  const kept = new Map<string, string>();
  if (io.managedPaths().includes(DCONF_USER_PROFILE) && await io.fs.exists(dconfKeyfilePath("local"))) {
    kept.set(DCONF_USER_PROFILE, (await io.fs.readTextFile(DCONF_USER_PROFILE)) ?? "");
  }
  return kept;
}

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
  if (kde.length) {
    files.set(
      KIOSLAVERC,
      renderKconfigFile(KDE_HEADER, [{ path: [KDE_GROUP], keys: kde.map((w) => ({ ...w })) }]),
    );
  }
  return { files, winner: { policy: first.policy, config }, present: found, gnome, kde };
}

/** apt's merged configuration as apt reads it under the node's root. */
async function readApt(io: EnforcerIO): Promise<Map<string, string> | string> {
  const scratch = await Deno.makeTempDir({ prefix: "svc-apt-read-" });
  try {
    await Deno.writeTextFile(
      `${scratch}/apt.conf`,
      `Dir::Etc::Parts "${await io.fs.resolve("/etc/apt/apt.conf.d")}";\n` +
        `Dir::Etc::Main "${await io.fs.resolve("/etc/apt/apt.conf")}";\n`,
    );
    const result = await io.runner.run("apt-config", ["dump", "Acquire"], {
      env: { APT_CONFIG: `${scratch}/apt.conf` },
      timeoutMs: 60_000,
    });
    if (!result.success) return `apt-config failed: ${(result.stderr || result.stdout).trim().slice(0, 500)}`;
    const out = new Map<string, string>();
    for (const m of result.stdout.matchAll(/^(\S+) "(.*)";$/gm)) out.set(m[1], m[2]);
    return out;
  } finally {
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
  }
}

async function readBack(io: EnforcerIO, plan: ProxyPlan): Promise<ProxySeen> {
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
    kde: plan.kde.length ? await readKde(io, plan.kde) : new Map(),
    firefox: await browserViews(io, firefoxFamily, ["Proxy"]),
    chromium: await browserViews(io, chromeFamily, [
      "ProxyMode",
      "ProxyServer",
      "ProxyPacUrl",
      "ProxyBypassList",
    ]),
  };
}

const WORDS: SummaryWords = {
  inEffect: (ok, skipped) =>
    `proxy in effect in ${ok} place(s)` + (skipped ? `; ${skipped} not applicable` : ""),
  none: "target",
  noun: "place(s)",
  label: (i) => `${i.key} (${i.schemaId})`,
};

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The items of the winning configuration, one per place a desktop reads it. */
function targetItems(plan: ProxyPlan, seen: ProxySeen, failed: Map<string, string>): ItemResult[] {
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
  else {compare(
      "dnf",
      DNF_CONF,
      new Map([["proxy", dnf]]),
      new Map(seen.dnf === undefined ? [] : [["proxy", seen.dnf]]),
    );}

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
    const session = seen.gnome;
    const wrong = gnomePlanned(plan.winner!.policy, config).map((p) => {
      const path = `${p.dir}${p.key}`;
      const actual = session.values.get(path);
      let equal = false;
      try {
        equal = actual !== undefined && gvariantEquals(p.value, parseGVariant(actual, p.value.type));
      } catch {
        equal = false;
      }
      if (!equal) {
        return `${path}: expected ${formatGVariant(p.value)}, a session reads ${actual ?? "nothing"}`;
      }
      return session.locks.has(path) ? undefined : `${path} is set but not locked: users can change it`;
    }).find((problem) => problem);
    if (wrong) add("GNOME", DCONF_KEYFILE, "NON_COMPLIANT", wrong);
    else add("GNOME", DCONF_KEYFILE, "COMPLIANT", "GNOME sessions use the proxy (locked)");
  }

  if (!plan.present.kde) add("KDE", KIOSLAVERC, "INAPPLICABLE", "KDE Plasma is not installed");
  else {
    const error = failed.get(KIOSLAVERC);
    const wrong = plan.kde.find((w) => {
      const got = seen.kde.get(w);
      return typeof got !== "object" || got.value !== w.value || !got.immutable;
    });
    if (error) add("KDE", KIOSLAVERC, "ERROR", error);
    else if (wrong) {
      const got = seen.kde.get(wrong);
      add(
        "KDE",
        KIOSLAVERC,
        typeof got === "string" ? "ERROR" : "NON_COMPLIANT",
        typeof got === "string"
          ? got
          : `${wrong.key}: expected ${wrong.value} (immutable), KDE reads ${got?.value ?? "nothing"}${
            got && !got.immutable ? " (not immutable)" : ""
          }`,
      );
    } else add("KDE", KIOSLAVERC, "COMPLIANT", "KDE uses the proxy (immutable)");
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
    (path === KIOSLAVERC && text.startsWith(`# ${KDE_HEADER}`)),
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
