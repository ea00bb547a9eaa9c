/**
 * The KDE configuration file format (KConfig "INI" files such as kdeglobals, kwinrc), as far as svc writes and
 * reads it, shared by the server (validation), the agent (rendering, read-back without KDE's reader) and the
 * web editor.
 *
 * Names are refused rather than escaped: a group or key containing `[`, `]`, `=`, `$`, `\\`, `#`, `;` or a
 * control character would open a new group, end the key, start a KConfig option such as `[$i]` or `[$e]`
 * (shell expansion), an escape or a comment, so such names never reach a file; a few more characters that no
 * KDE name uses are refused as well (see the name checks). Values must be one line (control characters refused) and are escaped the
 * way KConfig reads them back: `\` → `\\`, a leading or trailing space → `\s` (KConfig trims unescaped
 * ones). svc never writes the `[$e]` option, so `$` in a value stays literal.
 *
 * @module
 */

import { singleLine } from "./policy_types/sanitizers.ts";

/**
 * What a group or key name may not be, for both: one line (no control, line-separator, bidi or lone-surrogate
 * character), no `[`, `]`, `=`, `$`, `\\`, `#` or `;` (group and key syntax, options such as `[$i]`, escapes,
 * comments), no surrounding spaces, at most 255 bytes. Beyond the format, characters KConfig would store but no
 * KDE name uses are refused too, because names are also shown, logged and passed to `kreadconfig`: `|`, `<`,
 * `>` (`<default>` is KConfig's own name for the keys before the first group), backquotes, `..`, and a leading
 * `-` (it reads as a command-line option).
 */
function kconfigNameBaseProblem(value: string): string | undefined {
  if (value.length === 0) return "must not be empty";
  const line = singleLine(value);
  if (line) return line;
  if (value.trim() !== value) return "must not start or end with spaces";
  if (/[[\]=$\\#;]/.test(value)) {
    return "must not contain '[', ']', '=', '$', '\\', '#' or ';' (they have a meaning in KDE config files)";
  }
  if (/[|<>`]/.test(value)) {
    return "must not contain '|', '<', '>' or '`' (no KDE setting name uses them; they have a meaning in shells)";
  }
  if (value.includes("..")) return "must not contain '..'";
  if (value.startsWith("-")) return "must not start with '-' (it would read as a command-line option)";
  if (new TextEncoder().encode(value).length > 255) return "must be at most 255 bytes";
  return undefined;
}

/**
 * A group name (each part of `[a][b]`): the shared name rules, and no `/` (a group is a section name such as
 * `General`, `Icons`, `org.kde.kdecoration2` or `Containments`; KDE's nesting is the `[a][b]` parts).
 */
export function kconfigGroupProblem(value: string): string | undefined {
  const base = kconfigNameBaseProblem(value);
  if (base) return base;
  if (value.includes("/")) return "must not contain '/' (nest groups with subgroups instead)";
  return undefined;
}

/**
 * A key name: the shared name rules; `/` only between non-empty parts, as in KDE's Kiosk keys
 * (`action/logout`, `plasma/plasmashell/unlockedDesktop`).
 */
export function kconfigKeyProblem(value: string): string | undefined {
  const base = kconfigNameBaseProblem(value);
  if (base) return base;
  if (value.split("/").some((part) => part === "")) {
    return "may contain '/' only between parts, as in action/logout (not at an end or twice in a row)";
  }
  return undefined;
}

/**
 * A KDE config file name svc may write under the system configuration directory: `kdeglobals` or a name
 * ending in `rc` (kwinrc, plasmarc, kscreenlockerrc, plasma-org.kde.plasma.desktop-appletsrc), plain (no
 * `/`), not hidden. `kde5rc`/`kde6rc` are not files of that directory (KCM restrictions go there).
 */
export function kconfigFileProblem(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  if (value === "kde5rc" || value === "kde6rc") {
    return "kde5rc/kde6rc are written by svc for System Settings module restrictions; use kcm_restrictions";
  }
  if (!/^(kdeglobals|[A-Za-z0-9][A-Za-z0-9._-]{0,120}rc)$/.test(value)) {
    return "must be kdeglobals or a KDE config file name ending in rc, such as kwinrc (no '/')";
  }
  return undefined;
}

/**
 * A value: one line (the shared one-line rule: no newline, tab, NUL, other control, line-separator, bidi or
 * lone-surrogate character), at most 64 KiB.
 */
export function kconfigValueProblem(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return `${line}: put the value on one line`;
  if (value.includes("\ufeff")) return "must not contain U+FEFF (a byte-order mark KDE's reader drops)";
  if (value.length > 65536) return "must be at most 65536 characters";
  return undefined;
}

/**
 * Escapes a value for a `key=value` line: `\` doubled, a leading or trailing space written `\s` (KConfig trims
 * unescaped ones).
 *
 * @throws {Error} for a value {@linkcode kconfigValueProblem} refuses.
 */
export function escapeKconfigValue(value: string): string {
  const problem = kconfigValueProblem(value);
  if (problem) throw new Error(`KDE config value ${problem}`);
  const escaped = value.replaceAll("\\", "\\\\");
  return escaped.replace(/^ /, "\\s").replace(/ $/, "\\s");
}

/** Reverses {@linkcode escapeKconfigValue} (and KConfig's other escapes) for a raw value text. */
export function unescapeKconfigValue(text: string): string {
  let out = "";
  const raw = text.trim();
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i];
    if (ch !== "\\") {
      out += ch;
      continue;
    }
    const next = raw[++i];
    if (next === "n") out += "\n";
    else if (next === "t") out += "\t";
    else if (next === "r") out += "\r";
    else if (next === "s") out += " ";
    else if (next === "\\") out += "\\";
    else if (next === "x" && /^[0-9A-Fa-f]{2}$/.test(raw.slice(i + 1, i + 3))) {
      out += String.fromCharCode(parseInt(raw.slice(i + 1, i + 3), 16));
      i += 2;
    } else if (next !== undefined) out += `\\${next}`;
  }
  return out;
}

/** One key of a rendered file. */
export interface KconfigKey {
  key: string;
  value: string;
  /** `key[$i]=value`: users cannot override it. */
  immutable: boolean;
}

/** One group (with its nesting) of a rendered file. */
export interface KconfigGroup {
  /** Outermost first: ["Containments", "1", "Wallpaper"]. */
  path: string[];
  keys: KconfigKey[];
}

/**
 * Renders a file: a comment header, then groups sorted by path, keys sorted by name. A group whose keys are
 * all immutable gets `[…][$i]` on the header (the whole group is locked); otherwise each immutable key gets
 * `key[$i]`.
 *
 * @throws {Error} when a name or value would break the format (the caller validated them already; this is
 *   the last line of defence).
 */
export function renderKconfigFile(header: string, groups: readonly KconfigGroup[]): string {
  const sorted = [...groups].sort((a, b) => compare(a.path.join("\u0000"), b.path.join("\u0000")));
  const blocks = sorted.filter((g) => g.keys.length > 0).map((g) => {
    for (const part of g.path) {
      const problem = kconfigGroupProblem(part);
      if (problem) throw new Error(`KDE config group "${part}" ${problem}`);
    }
    const keys = [...g.keys].sort((a, b) => compare(a.key, b.key));
    const allImmutable = keys.every((k) => k.immutable);
    const lines = [`${g.path.map((p) => `[${p}]`).join("")}${allImmutable ? "[$i]" : ""}`];
    for (const k of keys) {
      const problem = kconfigKeyProblem(k.key);
      if (problem) throw new Error(`KDE config key "${k.key}" ${problem}`);
      lines.push(`${k.key}${k.immutable && !allImmutable ? "[$i]" : ""}=${escapeKconfigValue(k.value)}`);
    }
    return lines.join("\n");
  });
  const comment = header.split("\n").map((l) => `# ${l}`).join("\n");
  return `${comment}\n\n${blocks.join("\n\n")}\n`;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** What {@linkcode parseKconfigFile} found for one key. */
export interface ParsedKey {
  value: string;
  immutable: boolean;
}

/**
 * Reads a KDE config file the way KConfig does for what svc writes: groups (nested `[a][b]`, `[$i]` on a group
 * header), `key[$i]=value` (other options after the key ignored), `#` comments, escapes. Keys of a group are
 * keyed by the group path joined with `\u0000`, then by key name. A later duplicate keeps the first value, as
 * KConfig does within one file.
 */
export function parseKconfigFile(text: string): Map<string, Map<string, ParsedKey>> {
  const groups = new Map<string, Map<string, ParsedKey>>();
  let group = "";
  let groupImmutable = false;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    if (line.startsWith("[")) {
      const parts: string[] = [];
      let rest = line;
      let immutable = false;
      while (rest.startsWith("[")) {
        const end = rest.indexOf("]");
        if (end < 0) break;
        const part = rest.slice(1, end);
        if (part === "$i") immutable = true;
        else parts.push(part);
        rest = rest.slice(end + 1);
      }
      group = parts.join("\u0000");
      groupImmutable = immutable;
      continue;
    }
    const eq = line.indexOf("=");
    if (eq <= 0) continue;
    let key = line.slice(0, eq).trim();
    let immutable = groupImmutable;
    const option = /^(.*?)\[(.*)\]$/.exec(key);
    if (option) {
      key = option[1];
      if (/\$i/.test(option[2])) immutable = true;
    }
    const keys = groups.get(group) ?? new Map<string, ParsedKey>();
    groups.set(group, keys);
    if (!keys.has(key)) keys.set(key, { value: unescapeKconfigValue(line.slice(eq + 1)), immutable });
  }
  return groups;
}
