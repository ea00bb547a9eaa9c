/**
 * AppStream catalogue documents (`appstream.xml`, gzip or not) → the applications the catalogue
 * indexes: id, name, summary, icon and versions. Only what the index needs is read; untranslated
 * `name`/`summary` win over translations; elements other than `component` are skipped. The reader is a
 * small tokenizer, not a general XML parser: no DTDs or entity definitions are honoured (only the five
 * predefined entities and character references), so entity-expansion attacks have nothing to expand.
 *
 * @module
 */

/** One indexed application. */
export interface CatalogApp {
  appId: string;
  name: string;
  summary: string;
  /** A remote icon URL, a cached icon's URL under the repository, or "". */
  iconUrl: string;
  /** Release versions, newest first as listed. */
  versions: string[];
}

const MAX_APPS = 100_000;

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#\d+|amp|lt|gt|quot|apos);/g, (_, e: string) => {
    if (e[0] === "#") {
      const code = e[1] === "x" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : "";
    }
    return { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" }[e]!;
  });
}

function attributes(tag: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of tag.matchAll(/([A-Za-z_:][-A-Za-z0-9_:.]*)\s*=\s*("([^"]*)"|'([^']*)')/g)) {
    out[m[1]] = decodeEntities(m[3] ?? m[4] ?? "");
  }
  return out;
}

function oneLine(text: string, max: number): string {
  // deno-lint-ignore no-control-regex
  return text.replace(/[\x00-\x1f\x7f]+/g, " ").replace(/\s+/g, " ").trim().slice(0, max);
}

/** Whether bytes start with the gzip magic number. */
export function isGzip(bytes: Uint8Array): boolean {
  return bytes.length > 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
}

/** Gunzips when needed, with a limit on the inflated size. */
export async function appstreamText(bytes: Uint8Array, maxBytes: number): Promise<string> {
  if (!isGzip(bytes)) return new TextDecoder().decode(bytes);
  const reader = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
    new DecompressionStream("gzip"),
  ).getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > maxBytes) {
      await reader.cancel();
      throw new Error(`the AppStream document inflates beyond ${maxBytes} bytes`);
    }
    chunks.push(value);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.length;
  }
  return new TextDecoder().decode(all);
}

/**
 * Parses an AppStream catalogue. `iconBase` is the URL cached icons live under
 * (`…/icons/64x64/<name>`), or "" to leave cached icons out. Throws when the text is no AppStream
 * catalogue.
 */
export function parseAppstream(xml: string, iconBase = ""): CatalogApp[] {
  if (!/<components[\s>]/.test(xml)) throw new Error("not an AppStream catalogue: no <components> element");
  const apps = new Map<string, CatalogApp>();
  const componentRe = /<component(\s[^>]*)?>([\s\S]*?)<\/component>/g;
  for (const match of xml.matchAll(componentRe)) {
    const type = attributes(match[1] ?? "").type ?? "";
    if (
      type && !["desktop-application", "desktop", "console-application", "web-application"].includes(type)
    ) continue;
    const body = match[2];
    const field = (name: string): string => {
      const re = new RegExp(`<${name}(\\s[^>]*)?>([\\s\\S]*?)</${name}>`, "g");
      let fallback = "";
      for (const m of body.matchAll(re)) {
        const attrs = attributes(m[1] ?? "");
        const value = decodeEntities(m[2].replace(/<[^>]*>/g, ""));
        if (!attrs["xml:lang"]) return value;
        if (attrs["xml:lang"].startsWith("en") && !fallback) fallback = value;
      }
      return fallback;
    };
    const appId = oneLine(field("id"), 255).replace(/\.desktop$/, "");
    if (!/^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*){2,}$/.test(appId)) continue;
    let iconUrl = "";
    for (const m of body.matchAll(/<icon(\s[^>]*)?>([\s\S]*?)<\/icon>/g)) {
      const attrs = attributes(m[1] ?? "");
      const value = oneLine(decodeEntities(m[2]), 2048);
      if (attrs.type === "remote" && /^https:\/\//.test(value)) {
        iconUrl = value;
        break;
      }
      if (attrs.type === "cached" && iconBase && /^[A-Za-z0-9._-]+\.png$/.test(value) && !iconUrl) {
        iconUrl = `${iconBase}/icons/${
          attrs.width && /^\d+$/.test(attrs.width) ? `${attrs.width}x${attrs.width}` : "64x64"
        }/${value}`;
      }
    }
    const versions = [...body.matchAll(/<release(\s[^>]*)?\/?>/g)]
      .map((m) => oneLine(attributes(m[1] ?? "").version ?? "", 64)).filter(Boolean).slice(0, 20);
    apps.set(appId, {
      appId,
      name: oneLine(field("name"), 256) || appId,
      summary: oneLine(field("summary"), 512),
      iconUrl,
      versions,
    });
    if (apps.size > MAX_APPS) {
      throw new Error(`the AppStream catalogue lists more than ${MAX_APPS} applications`);
    }
  }
  return [...apps.values()].sort((a, b) => (a.appId < b.appId ? -1 : 1));
}
