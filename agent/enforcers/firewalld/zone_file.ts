/**
 * The files svc writes for firewalld: a zone file is the zone as it was before svc (the backed-up original, or the
 * stock zone in `/usr/lib/firewalld/zones`) with the kinds of element svc owns replaced, so interfaces bound by
 * NetworkManager or an admin's own settings of other kinds survive; `firewalld.conf` is the node's own with
 * `DefaultZone=` set. The XML is produced by a writer that escapes everything.
 *
 * @module
 */

import type { EnforcerIO } from "../../sync/types.ts";
import { childText, parseXml, serializeXml, type XmlElement, type XmlNode } from "../../xml.ts";
import { originalText } from "../desktop_enforcer.ts";
import type { ListKind, MergedZone } from "./zones.ts";

/** Node paths firewalld reads. */
export const FIREWALLD_ETC = "/etc/firewalld";
export const FIREWALLD_ZONES = `${FIREWALLD_ETC}/zones`;
export const FIREWALLD_CONF = `${FIREWALLD_ETC}/firewalld.conf`;
export const FIREWALLD_STOCK = "/usr/lib/firewalld";

/** First comment of every zone file svc writes. */
export const FIREWALLD_MARKER = "This zone is managed by svc; edits are overwritten by policy enforcement.";
export const CONF_MARKER = "# DefaultZone is managed by svc; edits are overwritten by policy enforcement.";

/** Whether a zone file is svc's own. */
export function isOwnZone(text: string): boolean {
  return text.slice(0, 300).includes(FIREWALLD_MARKER);
}

const LIST_ORDER: ListKind[] = [
  "service",
  "port",
  "protocol",
  "icmp-block",
  "forward-port",
  "source-port",
  "rule",
  "interface",
  "source",
];

/** Renders a zone file: the base zone with the kinds svc owns replaced. */
export function renderZone(zone: MergedZone, base: XmlElement | undefined): string {
  const owned = new Set<string>([...zone.lists.keys(), ...zone.flags.keys()]);
  if (zone.short) owned.add("short");
  if (zone.description) owned.add("description");
  const attrs: Record<string, string> = {};
  for (const [k, v] of Object.entries(base?.attrs ?? {})) if (k !== "target" || !zone.target) attrs[k] = v;
  if (zone.target && zone.target.value !== "default") attrs.target = zone.target.value;
  const children: XmlNode[] = [];
  const short = zone.short?.value ?? (base ? childText(base, "short") : "");
  const description = zone.description?.value ?? (base ? childText(base, "description") : "");
  if (short) children.push({ name: "short", text: short });
  if (description) children.push({ name: "description", text: description });
  for (const child of base?.children ?? []) {
    if (child.name === "short" || child.name === "description" || owned.has(child.name)) continue;
    children.push(toNode(child));
  }
  for (const kind of LIST_ORDER) {
    for (const { node } of zone.lists.get(kind)?.values() ?? []) children.push(node);
  }
  for (const flag of zone.flags.keys()) children.push({ name: flag });
  return serializeXml({ name: "zone", attrs, children }, { leading: [{ comment: FIREWALLD_MARKER }] });
}

function toNode(element: XmlElement): XmlNode {
  const text = element.children.length ? undefined : element.text.trim() || undefined;
  return { name: element.name, attrs: { ...element.attrs }, children: element.children.map(toNode), text };
}

/** The zone as it was before svc: the backed-up original, the current foreign file, or the stock zone. */
export async function baseZone(io: EnforcerIO, path: string, name: string): Promise<XmlElement | undefined> {
  const text = await originalText(io, path, isOwnZone) ??
    await io.fs.readTextFile(`${FIREWALLD_STOCK}/zones/${name}.xml`);
  if (text === undefined) return undefined;
  try {
    const root = parseXml(text, { maxLength: 1 << 20 });
    return root.name === "zone" ? root : undefined;
  } catch (err) {
    io.logger.warn("existing firewalld zone does not parse; only svc's settings are kept", {
      path,
      error: (err as Error).message,
    });
    return undefined;
  }
}

/** `firewalld.conf` with `DefaultZone=` set to `zone`. */
export function renderConf(current: string | undefined, zone: string): string {
  const lines = (current ?? "").split("\n").filter((l) => l !== CONF_MARKER);
  const at = lines.findIndex((l) => /^\s*DefaultZone\s*=/.test(l));
  const entry = [CONF_MARKER, `DefaultZone=${zone}`];
  if (at >= 0) lines.splice(at, 1, ...entry);
  else lines.unshift(...entry);
  const text = lines.join("\n");
  return text.endsWith("\n") ? text : `${text}\n`;
}
