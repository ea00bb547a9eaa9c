/**
 * Catalogues the agent reports to feed the server's editors: the GSettings
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

function keyOf(k: XmlElement, enums: Map<string, EnumValue[]>, flags: Map<string, EnumValue[]>): SchemaKey {
  const range = childrenNamed(k, "range")[0];
  const choices = childrenNamed(k, "choices")[0];
  const isFlags = k.attrs.flags !== undefined;
  return {
    name: k.attrs.name,
    type: k.attrs.type ?? (isFlags ? "as" : k.attrs.enum !== undefined ? "s" : ""),
    summary: childText(k, "summary").replace(/\s+/g, " "),
    description: childText(k, "description").replace(/\s+/g, " "),
    defaultValue: childText(k, "default"),
    enumValues: k.attrs.enum ? enums.get(k.attrs.enum) ?? [] : isFlags ? flags.get(k.attrs.flags) ?? [] : [],
    rangeMin: range?.attrs.min ?? "",
    rangeMax: range?.attrs.max ?? "",
    choices: choices ? childrenNamed(choices, "choice").map((c) => c.attrs.value ?? "").filter((v) => v) : [],
    flags: isFlags,
  };
}

/**
 * Vendor overrides of key defaults (`*.gschema.override`, keyfile format: `[schema.id]` then `key=value`), in
 * file name order as glib-compile-schemas applies them (a later file wins).
 */
async function readOverrides(fs: RootFs): Promise<Map<string, Map<string, string>>> {
  const out = new Map<string, Map<string, string>>();
  for (const name of await fs.readDir(SCHEMAS_DIR)) {
    if (!name.endsWith(".gschema.override")) continue;
    const text = await fs.readTextFile(`${SCHEMAS_DIR}/${name}`).catch(() => undefined);
    if (!text) continue;
    let group: Map<string, string> | undefined;
    for (const raw of text.split("\n")) {
      const line = raw.trim();
      if (line === "" || line.startsWith("#")) continue;
      const header = /^\[([^\]]+)\]$/.exec(line);
      if (header) {
        // "[schema.id:desktop]" applies only on that desktop; the plain id is what every session sees.
        group = header[1].includes(":") ? undefined : out.get(header[1]) ?? new Map();
        if (group) out.set(header[1], group);
        continue;
      }
      const eq = line.indexOf("=");
      if (group && eq > 0) group.set(line.slice(0, eq).trim(), line.slice(eq + 1).trim());
    }
  }
  return out;
}

/**
 * Reads every GSettings schema (and the enums and flags they use) from `*.xml` files under the
 * schemas directory; undefined when the directory does not exist. Schemas that `extends` another
 * inherit its keys (with their `<override>` defaults), and vendor `*.gschema.override` files
 * replace defaults, so each key's default is the one a session sees.
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
  const elements = new Map<string, XmlElement>();
  for (const root of roots) {
    for (const s of childrenNamed(root, "schema")) {
      if (s.attrs.id && !elements.has(s.attrs.id)) elements.set(s.attrs.id, s);
    }
  }
  const keysOf = (id: string, seen: Set<string>): SchemaKey[] => {
    const s = elements.get(id);
    if (!s || seen.has(id)) return [];
    seen.add(id);
    const own = childrenNamed(s, "key").filter((k) => k.attrs.name).map((k) => keyOf(k, enums, flags));
    const inherited = s.attrs.extends ? keysOf(s.attrs.extends, seen) : [];
    const overrides = new Map(childrenNamed(s, "override").map((o) => [o.attrs.name ?? "", o.text.trim()]));
    const names = new Set(own.map((k) => k.name));
    return [
      ...inherited.filter((k) => !names.has(k.name)).map((k) =>
        overrides.has(k.name) ? { ...k, defaultValue: overrides.get(k.name)! } : k
      ),
      ...own,
    ];
  };
  const vendor = await readOverrides(fs);
  const schemas: Schema[] = [];
  for (const [schemaId, s] of elements) {
    const defaults = vendor.get(schemaId);
    const keys = keysOf(schemaId, new Set()).map((k) =>
      defaults?.has(k.name) ? { ...k, defaultValue: defaults.get(k.name)! } : k
    ).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    schemas.push({ schemaId, path: s.attrs.path ?? "", relocatable: !s.attrs.path, keys });
  }
  return schemas.sort((a, b) => (a.schemaId < b.schemaId ? -1 : 1));
}

/**
 * A fingerprint of the schemas directory (names, sizes and modification times of its files): it changes
 * when a package adds, removes or updates schemas, which is when the catalogue is reported again. ""
 * when the directory does not exist.
 */
export async function schemasFingerprint(fs: RootFs): Promise<string> {
  if (!(await fs.stat(SCHEMAS_DIR))?.isDirectory) return "";
  const parts: string[] = [];
  for (const name of await fs.readDir(SCHEMAS_DIR)) {
    if (!name.endsWith(".xml") && !name.endsWith(".override")) continue;
    const info = await fs.stat(`${SCHEMAS_DIR}/${name}`).catch(() => undefined);
    parts.push(`${name}:${info?.size ?? 0}:${info?.mtime?.getTime() ?? 0}`);
  }
  return parts.join("\n");
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

/** What {@linkcode GSettingsCatalogueReporter.reportIfChanged} sends. */
export interface SchemaCatalogueReport {
  gnomeVersion: string;
  schemas: Schema[];
}

/**
 * Reports the GSettings catalogue once per process and again whenever the schemas directory changes
 * (a package added, removed or updated schemas), judged by {@linkcode schemasFingerprint}. A failed send is
 * retried at the next call.
 */
export class GSettingsCatalogueReporter {
  #reported: string | undefined;

  /**
   * Scans and sends when the directory differs from what was last reported. Resolves "unchanged", "sent", or
   * "none" (no schemas directory: nothing to report, remembered as reported).
   */
  async reportIfChanged(
    fs: RootFs,
    send: (report: SchemaCatalogueReport) => Promise<void>,
  ): Promise<"unchanged" | "sent" | "none"> {
    const fingerprint = await schemasFingerprint(fs);
    if (fingerprint === this.#reported) return "unchanged";
    const schemas = await scanGSettingsSchemas(fs);
    if (schemas === undefined) {
      this.#reported = fingerprint;
      return "none";
    }
    await send({ gnomeVersion: await gnomeVersion(fs), schemas });
    this.#reported = fingerprint;
    return "sent";
  }
}

/**
 * Parses `pkaction --verbose`: blocks separated by blank lines, each `<action id>:` followed by indented
 * `key: value` lines (description, message, vendor, vendor_url, icon, implicit any/inactive/active).
 */
export function parsePkactionVerbose(text: string): PolkitActionInfo[] {
  const actions = new Map<string, PolkitActionInfo>();
  for (const block of text.split(/\n\s*\n/)) {
    const lines = block.split("\n").filter((l) => l.trim() !== "");
    const head = /^([A-Za-z0-9][A-Za-z0-9._-]*):\s*$/.exec(lines[0] ?? "");
    if (!head) continue;
    const info: PolkitActionInfo = {
      actionId: head[1],
      description: "",
      message: "",
      vendor: "",
      vendorUrl: "",
      iconName: "",
      defaultAny: "",
      defaultInactive: "",
      defaultActive: "",
    };
    for (const line of lines.slice(1)) {
      const m = /^\s+([a-z_ ]+?):\s*(.*)$/.exec(line);
      if (!m) continue;
      const value = m[2].trim();
      switch (m[1]) {
        case "description":
          info.description = value;
          break;
        case "message":
          info.message = value;
          break;
        case "vendor":
          info.vendor = value;
          break;
        case "vendor_url":
          info.vendorUrl = value;
          break;
        case "icon":
          info.iconName = value;
          break;
        case "implicit any":
          info.defaultAny = value;
          break;
        case "implicit inactive":
          info.defaultInactive = value;
          break;
        case "implicit active":
          info.defaultActive = value;
          break;
      }
    }
    actions.set(info.actionId, info);
  }
  return [...actions.values()].sort((a, b) => (a.actionId < b.actionId ? -1 : 1));
}

/** A fingerprint of the polkit actions directory (names, sizes, modification times); "" when absent. */
export async function polkitActionsFingerprint(fs: RootFs): Promise<string> {
  if (!(await fs.stat(POLKIT_ACTIONS_DIR))?.isDirectory) return "";
  const parts: string[] = [];
  for (const name of await fs.readDir(POLKIT_ACTIONS_DIR)) {
    const info = await fs.stat(`${POLKIT_ACTIONS_DIR}/${name}`).catch(() => undefined);
    parts.push(`${name}:${info?.size ?? 0}:${info?.mtime?.getTime() ?? 0}`);
  }
  return parts.join("\n");
}

/**
 * Reports the polkit action catalogue once per process and again whenever the actions directory changes
 * (a package added or removed actions). On a real node (root `/`) the authority itself is asked
 * (`pkaction --verbose`, what polkitd really knows); under another root, or when polkitd does not answer, the
 * action files are read. A failed send is retried at the next call.
 */
export class PolkitCatalogueReporter {
  #reported: string | undefined;

  /** Scans and sends when the directory differs from what was last reported. */
  async reportIfChanged(
    fs: RootFs,
    runner: {
      run(
        cmd: string,
        args: string[],
        options?: { timeoutMs?: number },
      ): Promise<{ success: boolean; stdout: string }>;
    },
    send: (actions: PolkitActionInfo[]) => Promise<void>,
  ): Promise<"unchanged" | "sent" | "none"> {
    const fingerprint = await polkitActionsFingerprint(fs);
    if (fingerprint === this.#reported) return "unchanged";
    let actions: PolkitActionInfo[] | undefined;
    if (fs.root === "/") {
      const r = await runner.run("pkaction", ["--verbose"], { timeoutMs: 30_000 });
      if (r.success) actions = parsePkactionVerbose(r.stdout);
    }
    if (!actions?.length) actions = await scanPolkitActions(fs);
    if (actions === undefined) {
      this.#reported = fingerprint;
      return "none";
    }
    await send(actions);
    this.#reported = fingerprint;
    return "sent";
  }
}
