/**
 * The Proxy type on the desktops' own settings, through the Dconf and Kconfig types' parts (one renderer, compiler
 * and reader each):
 * - GNOME: `org.gnome.system.proxy` keys, locked, in keyfile `svc-proxy` of the `local` database, and the `user`
 *   profile listing that database when it does not yet; read back as a session reads them (`dconf dump`,
 *   `dconf list-locks`);
 * - KDE: `[Proxy Settings]` in `/etc/xdg/kioslaverc`, immutable; read back with `kreadconfig5`.
 *
 * @module
 */

import { formatGVariant, type GValue, gvariantEquals, parseGVariant } from "../../../shared/gvariant.ts";
import { renderKconfigFile } from "../../../shared/kconfig_format.ts";
import type { CachedPolicy, EnforcerIO } from "../../sync/types.ts";
import { DCONF_DB_DIR, DCONF_PROFILE_DIR, type DconfKey, dconfKeyfilePath } from "../dconf/render.ts";
import type { DconfSession } from "../dconf/tool.ts";
import type { KdeReading } from "../kconfig/read_back.ts";
import type { KdeKey } from "../kconfig/render.ts";
import { gnomeKeys, kdeKeys, type ProxyConfig } from "./settings.ts";

/** Node paths svc writes. */
export const LOCAL_DB = `${DCONF_DB_DIR}/local`;
export const LOCAL_DB_SOURCES = `${LOCAL_DB}.d`;
export const DCONF_KEYFILE = `${LOCAL_DB_SOURCES}/svc-proxy`;
export const DCONF_LOCKS = `${LOCAL_DB_SOURCES}/locks/svc-proxy`;
export const DCONF_USER_PROFILE = `${DCONF_PROFILE_DIR}/user`;
export const KIOSLAVERC = "/etc/xdg/kioslaverc";
/** The GNOME schema of the proxy keys (node path): GNOME's proxy applies where it is installed. */
export const GNOME_PROXY_SCHEMA = "/usr/share/glib-2.0/schemas/org.gnome.system.proxy.gschema.xml";

const KDE_HEADER =
  "Managed by svc (svc-agent). Local changes are overwritten; change the Proxy policy instead.";
const KDE_GROUP = "Proxy Settings";

/** A GNOME key as the Dconf renderer takes it, with what its report item names. */
export interface GnomeKey extends DconfKey {
  policy: CachedPolicy;
  db: string;
  profile: string;
  schemaId: string;
  label: string;
}

/** A KDE key as the Kconfig reader takes it, with its report item. */
export interface KdeWant extends KdeKey {
  policy: CachedPolicy;
  itemFile: string;
  itemKey: string;
}

/** GNOME's keys as the Dconf renderer takes them. */
export function gnomePlanned(policy: CachedPolicy, config: ProxyConfig): GnomeKey[] {
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
export function kdeWants(policy: CachedPolicy, config: ProxyConfig): KdeWant[] {
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

/** `/etc/xdg/kioslaverc` with KDE's keys. */
export function kioslavercFile(wants: readonly KdeWant[]): string {
  return renderKconfigFile(KDE_HEADER, [{ path: [KDE_GROUP], keys: wants.map((w) => ({ ...w })) }]);
}

/** Whether a kioslaverc is svc's own. */
export function isOwnKioslaverc(text: string): boolean {
  return text.startsWith(`# ${KDE_HEADER}`);
}

/** A profile line svc added for the proxy stays while the Dconf type's keys in the same database need it. */
export async function keptProfile(io: EnforcerIO): Promise<Map<string, string>> {
  const kept = new Map<string, string>();
  if (io.managedPaths().includes(DCONF_USER_PROFILE) && await io.fs.exists(dconfKeyfilePath("local"))) {
    kept.set(DCONF_USER_PROFILE, (await io.fs.readTextFile(DCONF_USER_PROFILE)) ?? "");
  }
  return kept;
}

/** The first GNOME key a session does not read as planned (value, then lock); undefined when all are. */
export function gnomeProblem(
  keys: readonly GnomeKey[],
  session: Exclude<DconfSession, string>,
): string | undefined {
  return keys.map((p) => {
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
}

/** The first KDE key KDE does not read as planned (value, then immutability), with what it reads. */
export function kdeProblem(
  wants: readonly KdeWant[],
  seen: Map<KdeWant, KdeReading>,
): { status: "ERROR" | "NON_COMPLIANT"; message: string } | undefined {
  const wrong = wants.find((w) => {
    const got = seen.get(w);
    return typeof got !== "object" || got.value !== w.value || !got.immutable;
  });
  if (!wrong) return undefined;
  const got = seen.get(wrong);
  if (typeof got === "string") return { status: "ERROR", message: got };
  return {
    status: "NON_COMPLIANT",
    message: `${wrong.key}: expected ${wrong.value} (immutable), KDE reads ${got?.value ?? "nothing"}${
      got && !got.immutable ? " (not immutable)" : ""
    }`,
  };
}
