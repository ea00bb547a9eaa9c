/**
 * Catalogues the agent reports once per process to feed the server's editors: the GSettings
 * schemas installed under `/usr/share/glib-2.0/schemas` and the polkit actions under
 * `/usr/share/polkit-1/actions` (both read under the agent's root). Files that do not parse
 * are skipped; a missing directory means no catalogue.
 *
 * @module
 */

import type { RootFs } from "./fs.ts";
import { childrenNamed, childText, parseXml, type XmlElement } from "./xml.ts";

/** Where GSettings schemas live. */
export const SCHEMAS_DIR = "/usr/share/glib-2.0/schemas";
/** Where polkit actions live. */
export const POLKIT_ACTIONS_DIR = "/usr/share/polkit-1/actions";

/** An enum or flags value. */
export interface EnumValue {
  nick: string;
  value: number;
}

/** A GSettings key. */
export interface SchemaKey {
  name: string;
  type: string;
  summary: string;
  description: string;
  defaultValue: string;
  enumValues: EnumValue[];
  rangeMin: string;
  rangeMax: string;
  choices: string[];
  flags: boolean;
}

/** A GSettings schema. */
export interface Schema {
  schemaId: string;
  path: string;
  relocatable: boolean;
  keys: SchemaKey[];
}

/** A polkit action. */
export interface PolkitActionInfo {
  actionId: string;
  description: string;
  message: string;
  vendor: string;
  vendorUrl: string;
  iconName: string;
  defaultAny: string;
  defaultInactive: string;
  defaultActive: string;
}

async function parseFiles(fs: RootFs, dir: string, suffix: string): Promise<XmlElement[]> {
  const roots: XmlElement[] = [];
  for (const name of await fs.readDir(dir)) {
    if (!name.endsWith(suffix)) continue;
    try {
      const text = await fs.readTextFile(`${dir}/${name}`);
      if (text !== undefined) roots.push(parseXml(text));
    } catch {
      // A broken file loses only its own entries.
    }
  }
  return roots;
}

function enumValues(element: XmlElement): EnumValue[] {
  return childrenNamed(element, "value")
    .map((v) => ({ nick: v.attrs.nick ?? "", value: Number(v.attrs.value ?? "NaN") }))
    .filter((v) => v.nick !== "" && Number.isInteger(v.value));
}

/**
 * Reads every GSettings schema (and the enums and flags they use) from `*.xml` files under the
 * schemas directory; undefined when the directory does not exist.
 */
export async function scanGSettingsSchemas(fs: RootFs): Promise<Schema[] | undefined> {
  if (!(await fs.stat(SCHEMAS_DIR))?.isDirectory) return undefined;
  const roots = (await parseFiles(fs, SCHEMAS_DIR, ".xml")).filter((r) => r.name === "schemalist");
  const enums = new Map<string, EnumValue[]>();
  const flags = new Map<string, EnumValue[]>();
  for (const root of roots) {
    for (const e of childrenNamed(root, "enum")) if (e.attrs.id) enums.set(e.attrs.id, enumValues(e));
    for (const f of childrenNamed(root, "flags")) if (f.attrs.id) flags.set(f.attrs.id, enumValues(f));
  }
  const schemas = new Map<string, Schema>();
  for (const root of roots) {
    for (const s of childrenNamed(root, "schema")) {
      const schemaId = s.attrs.id;
      if (!schemaId || schemas.has(schemaId)) continue;
      const keys: SchemaKey[] = [];
      for (const k of childrenNamed(s, "key")) {
        if (!k.attrs.name) continue;
        const range = childrenNamed(k, "range")[0];
        const choices = childrenNamed(k, "choices")[0];
        const isFlags = k.attrs.flags !== undefined;
        keys.push({
          name: k.attrs.name,
          type: k.attrs.type ?? (isFlags ? "as" : k.attrs.enum !== undefined ? "s" : ""),
          summary: childText(k, "summary"),
          description: childText(k, "description").replace(/\s+/g, " "),
          defaultValue: childText(k, "default"),
          enumValues: k.attrs.enum
            ? enums.get(k.attrs.enum) ?? []
            : isFlags
            ? flags.get(k.attrs.flags) ?? []
            : [],
          rangeMin: range?.attrs.min ?? "",
          rangeMax: range?.attrs.max ?? "",
          choices: choices
            ? childrenNamed(choices, "choice").map((c) => c.attrs.value ?? "").filter((v) => v)
            : [],
          flags: isFlags,
        });
      }
      schemas.set(schemaId, { schemaId, path: s.attrs.path ?? "", relocatable: !s.attrs.path, keys });
    }
  }
  return [...schemas.values()].sort((a, b) => (a.schemaId < b.schemaId ? -1 : 1));
}

/** The GNOME version from `/usr/share/gnome/gnome-version.xml`, e.g. `43.9`; "" without GNOME. */
export async function gnomeVersion(fs: RootFs): Promise<string> {
  const text = await fs.readTextFile("/usr/share/gnome/gnome-version.xml").catch(() => undefined);
  if (!text) return "";
  try {
    const root = parseXml(text);
    return ["platform", "minor", "micro"].map((n) => childText(root, n)).filter((p) => p !== "").join(".");
  } catch {
    return "";
  }
}

/** Reads every polkit action under the actions directory; undefined when it does not exist. */
export async function scanPolkitActions(fs: RootFs): Promise<PolkitActionInfo[] | undefined> {
  if (!(await fs.stat(POLKIT_ACTIONS_DIR))?.isDirectory) return undefined;
  const actions = new Map<string, PolkitActionInfo>();
  for (const root of await parseFiles(fs, POLKIT_ACTIONS_DIR, ".policy")) {
    if (root.name !== "policyconfig") continue;
    const vendor = childText(root, "vendor");
    const vendorUrl = childText(root, "vendor_url");
    const iconName = childText(root, "icon_name");
    for (const a of childrenNamed(root, "action")) {
      const actionId = a.attrs.id;
      if (!actionId || actions.has(actionId)) continue;
      const defaults = childrenNamed(a, "defaults")[0];
      actions.set(actionId, {
        actionId,
        description: childText(a, "description"),
        message: childText(a, "message"),
        vendor: childText(a, "vendor") || vendor,
        vendorUrl: childText(a, "vendor_url") || vendorUrl,
        iconName: childText(a, "icon_name") || iconName,
        defaultAny: defaults ? childText(defaults, "allow_any") : "",
        defaultInactive: defaults ? childText(defaults, "allow_inactive") : "",
        defaultActive: defaults ? childText(defaults, "allow_active") : "",
      });
    }
  }
  return [...actions.values()].sort((a, b) => (a.actionId < b.actionId ? -1 : 1));
}
