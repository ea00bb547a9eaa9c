/**
 * Checkers for every policy value that later becomes a path, a file name, a command argument or part of a
 * generated file or script. The server runs them when content is saved or released; the agent runs the same
 * functions again before rendering, because it treats server data as untrusted.
 *
 * Each checker returns `undefined` when the value is acceptable, or a problem description meant for a person
 * ("must be a plain file name: letters, digits, '.', '_' and '-'"). {@link IssueList} turns those into
 * {@link ValidationIssue}s that name the field.
 */
import type { ValidationIssue } from "./errors.ts";

/** A checker: `undefined` when fine, otherwise what is wrong and how to fix it. */
export type Checker = (value: string) => string | undefined;

/** Largest accepted policy content, in bytes of UTF-8. */
export const MAX_CONTENT_BYTES = 1 << 20;
/** Deepest accepted JSON nesting of policy content. */
export const MAX_JSON_DEPTH = 32;
/** Longest accepted string anywhere in policy content, in characters. */
export const MAX_STRING_LENGTH = 64 * 1024;

/**
 * Characters no single-line value may carry: C0 controls (newline, tab, NUL, escape, …), DEL, C1 controls
 * (U+0085 NEXT LINE among them), the Unicode line and paragraph separators (JavaScript, polkit rules and many
 * renderers end a line there), the bidirectional embedding, override and isolate controls (they reorder what a
 * reader of a name or log sees), and UTF-16 halves without their partner (they have no UTF-8 form, so the
 * agent would write something other than what was saved).
 */
const NOT_SINGLE_LINE =
  // deno-lint-ignore no-control-regex
  /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** As {@link NOT_SINGLE_LINE}, but newline and tab are allowed. */
const NOT_MULTI_LINE =
  // deno-lint-ignore no-control-regex
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function describeChar(ch: string): string {
  if (ch === "\0") return "a NUL character";
  if (ch === "\n") return "a newline";
  if (ch === "\r") return "a carriage return";
  if (ch === "\t") return "a tab";
  const code = ch.charCodeAt(0);
  const hex = `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
  if (code === 0x2028 || code === 0x2029 || code === 0x85) return `the line separator ${hex}`;
  if (code >= 0xd800 && code <= 0xdfff) return `a lone UTF-16 surrogate ${hex} (not valid Unicode text)`;
  if (code >= 0x202a) return `the bidirectional text control ${hex}`;
  return `the control character ${hex}`;
}

/**
 * One line of plain text: no control characters at all (no NUL, newline, tab, escape, C1), no Unicode line
 * separators, no bidirectional overrides, no lone surrogates. For names and every single-line value.
 */
export function singleLine(value: string): string | undefined {
  const m = NOT_SINGLE_LINE.exec(value);
  return m ? `must not contain ${describeChar(m[0])}` : undefined;
}

/**
 * Free text rendered escaped (descriptions, filters): like {@link singleLine}, but newline and tab are
 * allowed. A carriage return is not: write plain newlines.
 */
export function multiLineText(value: string): string | undefined {
  const m = NOT_MULTI_LINE.exec(value);
  return m ? `must not contain ${describeChar(m[0])}` : undefined;
}

/** No NUL character (the one character no file format or argv can carry). */
export function noNul(value: string): string | undefined {
  return value.includes("\0") ? "must not contain a NUL character" : undefined;
}

/** At most `max` characters. */
export function maxLength(max: number): Checker {
  return (value) => [...value].length > max ? `must be at most ${max} characters` : undefined;
}

/** Not empty. */
export function required(value: string): string | undefined {
  return value.length === 0 ? "is required" : undefined;
}

/** Matches `pattern`; `hint` says what is allowed. */
export function matches(pattern: RegExp, hint: string): Checker {
  return (value) => singleLine(value) ?? (pattern.test(value) ? undefined : `must be ${hint}`);
}

/** One of `allowed`. */
export function oneOf(allowed: readonly string[]): Checker {
  return (value) =>
    allowed.includes(value)
      ? undefined
      : `must be one of ${allowed.map((a) => JSON.stringify(a)).join(", ")}`;
}

const FILE_NAME = /^[A-Za-z0-9._-]+$/;

/**
 * A safe single path component (file or directory name): letters, digits, `.`, `_`, `-`; not `.` or `..`,
 * at most 255 bytes. Never contains `/`, so it cannot climb out of the directory it is joined to.
 */
export function fileNameComponent(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  if (value.length === 0) return "must not be empty";
  if (value === "." || value === "..") return `"${value}" is not a valid file name`;
  if (!FILE_NAME.test(value)) {
    return "must be a plain file name: letters, digits, '.', '_' and '-' only (no '/')";
  }
  if (new TextEncoder().encode(value).length > 255) return "must be at most 255 bytes";
  return undefined;
}

/** Identifier: starts with a letter or digit, then letters, digits, `.`, `_`, `-`; at most `max` characters. */
export function identifier(max = 64): Checker {
  const re = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._-]{0,${max - 1}}$`);
  const hint =
    `must start with a letter or digit and contain only letters, digits, '.', '_' and '-' (at most ${max} characters)`;
  return (value) => singleLine(value) ?? (re.test(value) ? undefined : hint);
}

/**
 * An absolute, normalised path under one of `prefixes` (each ending in `/`): no `.` or `..` components, no
 * empty components, no control characters.
 */
export function absolutePathUnder(prefixes: readonly string[]): Checker {
  return (value) => {
    const bad = singleLine(value);
    if (bad) return bad;
    if (!value.startsWith("/")) return "must be an absolute path starting with '/'";
    const parts = value.split("/").slice(1);
    if (parts.some((p) => p === "." || p === "..")) return "must not contain '.' or '..' components";
    if (parts.slice(0, -1).some((p) => p === "")) return "must not contain '//'";
    if (!prefixes.some((prefix) => value.startsWith(prefix))) {
      return `must be under ${prefixes.join(" or ")}`;
    }
    return undefined;
  };
}

/** A URL whose scheme is one of `schemes` (e.g. `["https"]`), with a host, on a single line. */
export function urlWithScheme(schemes: readonly string[]): Checker {
  return (value) => {
    const bad = singleLine(value);
    if (bad) return bad;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      return `must be a valid URL (${schemes.join(" or ")})`;
    }
    const scheme = url.protocol.replace(/:$/, "");
    if (!schemes.includes(scheme)) return `URL scheme must be ${schemes.join(" or ")}, not "${scheme}"`;
    if (!url.hostname) return "URL must name a host";
    return undefined;
  };
}

/** A Unix user name (local or directory: letters, digits, `_`, `.`, `@`, `-`, optional trailing `$`). */
export const unixUserName: Checker = matches(
  /^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,254}\$?$/,
  "a user name: letters, digits, '_', '.', '@' and '-' (no spaces or quotes)",
);

/** A Unix or directory group name; like a user name, but inner spaces are allowed ("domain users"). */
export const unixGroupName: Checker = matches(
  /^[A-Za-z0-9_](?:[A-Za-z0-9_.@ -]{0,253}[A-Za-z0-9_.@$-])?$/,
  "a group name: letters, digits, '_', '.', '@', '-' and inner spaces (no quotes)",
);

/**
 * sudoers(5) reads a word in capitals (`[A-Z][A-Z0-9_]*`) as an alias, and `ALL` as everyone: an account so
 * named cannot be written as itself, so it is refused rather than silently meaning someone else.
 */
function sudoersAlias(value: string): string | undefined {
  return /^[A-Z][A-Z0-9_]*$/.test(value)
    ? "reads as a sudoers alias (a name in capitals such as ALL means something else to sudo); use the account's real name"
    : undefined;
}

/**
 * A user name a sudoers file can name as itself: a {@link unixUserName} (no `,`, `:`, `=`, `!`, `#`, `%`, `\`,
 * quotes or spaces, which sudoers gives meaning) that does not read as an alias (`ALL`, `ADMINS`).
 */
export function sudoersUserName(value: string): string | undefined {
  return unixUserName(value) ?? sudoersAlias(value);
}

/** A group name a sudoers file can name as `%group`: a {@link unixGroupName} that does not read as an alias. */
export function sudoersGroupName(value: string): string | undefined {
  return unixGroupName(value) ?? sudoersAlias(value);
}

/**
 * A script body: text with Unix line ends (no carriage return, which a shell reads as part of a command), no
 * NUL, no other control characters, and no bidirectional overrides (which make a script read otherwise than it
 * runs).
 */
export function scriptText(value: string): string | undefined {
  if (value.trim().length === 0) return "must not be empty";
  if (value.includes("\r")) return "must use Unix line ends: remove the carriage returns (\\r)";
  return multiLineText(value);
}

/** A GSettings schema id such as `org.gnome.desktop.screensaver`. */
export function gsettingsSchemaId(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  return /^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)+$/.test(value) && value.length <= 255
    ? undefined
    : "must be a GSettings schema id such as org.gnome.desktop.screensaver";
}

/** A dconf key name (no `/`, no brackets, no `=`, no whitespace). */
export const dconfKeyName: Checker = matches(
  /^[A-Za-z0-9][A-Za-z0-9_-]{0,254}$/,
  "a key name such as lock-delay: letters, digits, '-' and '_'",
);

/** A dconf directory path such as `/org/gnome/terminal/legacy/profiles:/:abc/` (starts and ends with `/`). */
export function dconfPath(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  if (!/^\/([A-Za-z0-9_.:-]+\/)+$/.test(value)) {
    return "must be a dconf path such as /org/gnome/desktop/background/ (starting and ending with '/')";
  }
  if (value.split("/").some((p) => p === "." || p === "..")) return "must not contain '.' or '..' components";
  return value.length > 1024 ? "must be at most 1024 characters" : undefined;
}

/**
 * A GVariant text value ("true", "'Adwaita'", "uint32 300", "['a', 'b']"): one line, quotes terminated and
 * brackets balanced, so it cannot spill into the next line of a dconf keyfile.
 */
export function gvariantText(value: string): string | undefined {
  if (value.trim().length === 0) return "must not be empty";
  const bad = singleLine(value);
  if (bad) return bad;
  const stack: string[] = [];
  const closing: Record<string, string> = { "(": ")", "[": "]", "{": "}", "<": ">" };
  for (let i = 0; i < value.length; i++) {
    const ch = value[i];
    if (ch === "'" || ch === '"') {
      let j = i + 1;
      while (j < value.length && value[j] !== ch) j += value[j] === "\\" ? 2 : 1;
      if (j >= value.length) return "has an unterminated string: close the quote";
      i = j;
    } else if (ch in closing) {
      stack.push(closing[ch]);
    } else if (ch === ")" || ch === "]" || ch === "}" || ch === ">") {
      if (stack.pop() !== ch) return `has an unbalanced '${ch}'`;
    }
  }
  return stack.length > 0 ? `is missing a closing '${stack[stack.length - 1]}'` : undefined;
}

/** A polkit action id or prefix: lowercase-ish dotted name, e.g. `org.freedesktop.udisks2.filesystem-mount`. */
export const polkitActionId: Checker = matches(
  /^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$/,
  "a polkit action id such as org.freedesktop.udisks2.filesystem-mount (letters, digits, '.', '_', '-')",
);

/**
 * A firewalld zone name: letters, digits, `_` and `-`, 1 to 17 characters (firewalld 1.3's own rule: it allows
 * alphanumerics, `_`, `-` and `/`, and 17 characters fit its longest netfilter chain name), starting with a
 * letter or digit. firewalld itself takes a leading `-`, but such a name reads as an option on a command line
 * (`-rf`, `--help`), so it is refused here.
 */
export function firewalldZoneName(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  if (/^-/.test(value)) {
    return "must start with a letter or digit (a leading '-' reads as a command-line option)";
  }
  return /^[A-Za-z0-9][A-Za-z0-9_-]{0,16}$/.test(value)
    ? undefined
    : "must be a zone name: letters, digits, '_' and '-', at most 17 characters, starting with a letter or digit";
}

/** A firewalld service, protocol or ICMP type name. */
export const firewalldName: Checker = matches(
  /^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$/,
  "a name such as ssh or echo-request: letters, digits, '.', '_', '+' and '-'",
);

/** A port (`443`) or inclusive range (`5000-6000`) within 1–65535. */
export function portSpec(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(value);
  if (!m) return "must be a port such as 443 or a range such as 5000-6000";
  const lo = Number(m[1]);
  const hi = m[2] === undefined ? lo : Number(m[2]);
  if (lo < 1 || hi > 65535) return "ports must be between 1 and 65535";
  if (hi < lo) return "a port range must not end before it starts";
  return undefined;
}

/** A transport protocol firewalld accepts for ports. */
export const portProtocol: Checker = oneOf(["tcp", "udp", "sctp", "dccp"]);

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** An IPv4 or IPv6 address, without prefix length. */
export function ipAddress(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  if (IPV4.test(value)) return undefined;
  if (/^[0-9A-Fa-f:.]+$/.test(value) && value.includes(":")) {
    try {
      new URL(`http://[${value}]/`);
      return undefined;
    } catch {
      // fall through
    }
  }
  return "must be an IPv4 or IPv6 address";
}

/** An address with an optional prefix length (`10.0.0.0/8`, `2001:db8::/32`). */
export function cidr(value: string): string | undefined {
  const [addr, prefix, ...rest] = value.split("/");
  if (rest.length > 0 || ipAddress(addr) !== undefined) {
    return "must be an address or network such as 10.0.0.0/8";
  }
  if (prefix === undefined) return undefined;
  const max = addr.includes(":") ? 128 : 32;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= max
    ? undefined
    : `prefix length must be between 0 and ${max}`;
}

/** A firewalld zone source: address/network, `mac:<address>` or `ipset:<name>`. */
export function firewalldSource(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  if (value.startsWith("mac:")) {
    return /^mac:([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$/.test(value)
      ? undefined
      : "must be mac: followed by a MAC address such as 00:11:22:33:44:55";
  }
  if (value.startsWith("ipset:")) {
    return /^ipset:[A-Za-z0-9_.-]{1,64}$/.test(value)
      ? undefined
      : "must be ipset: followed by an ipset name";
  }
  return cidr(value) === undefined
    ? undefined
    : "must be an address or network (10.0.0.0/8), mac:<address> or ipset:<name>";
}

/** A network interface name (Linux: at most 15 characters, no `/` or whitespace). */
export const interfaceName: Checker = matches(
  /^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,14}$/,
  "an interface name such as eth0 (at most 15 characters)",
);

/** Base64 text (standard alphabet, optional padding, whitespace between lines allowed). */
export function base64Text(value: string): string | undefined {
  // Whitespace is dropped first so the check stays linear (a pattern with `\s` on both sides of the padding
  // backtracks quadratically on long runs of spaces) and only ASCII line breaks count as whitespace.
  const compact = value.replace(/[ \t\r\n]+/g, "");
  return /^[A-Za-z0-9+/]+={0,2}$/.test(compact)
    ? undefined
    : "must be base64 text (letters, digits, '+', '/', '=' padding at the end, line breaks)";
}

/** "HH:MM" on a 24-hour clock. */
export const clockTime: Checker = matches(
  /^([01]\d|2[0-3]):[0-5]\d$/,
  "a time HH:MM on a 24-hour clock, e.g. 08:30",
);

/** An IANA time zone name such as `Europe/Berlin` (also safe as a path below /usr/share/zoneinfo). */
export function timeZoneName(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  return /^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+){0,2}$/.test(value) && value.length <= 64
    ? undefined
    : "must be an IANA time zone such as Europe/Berlin";
}

/** A Flatpak application id: at least three dot-separated parts, e.g. `org.mozilla.firefox`. */
export function flatpakAppId(value: string): string | undefined {
  const line = singleLine(value);
  if (line) return line;
  return /^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*){2,}$/.test(value) && value.length <= 255
    ? undefined
    : "must be an application id such as org.mozilla.firefox";
}

/** KConfig group or key text: one line, no `[`, `]` or `=` (they would start a new group or key). */
export function kconfigName(value: string): string | undefined {
  const bad = singleLine(value);
  if (bad) return bad;
  if (value.trim() !== value || value.length === 0) return "must not be empty or start/end with spaces";
  return /[[\]=]/.test(value) ? "must not contain '[', ']' or '='" : undefined;
}

/**
 * Collects issues while a validator walks a message. `check` runs checkers in order and records the first
 * problem; the helpers keep validators short and their field paths consistent.
 */
export class IssueList {
  readonly issues: ValidationIssue[] = [];

  /** Records a problem with `field`. */
  add(field: string, message: string): void {
    this.issues.push({ field, message });
  }

  /** Runs `checkers` on `value` and records the first problem; returns true when the value passed. */
  check(field: string, value: string, ...checkers: Checker[]): boolean {
    for (const checker of checkers) {
      const problem = checker(value);
      if (problem) {
        this.add(field, problem);
        return false;
      }
    }
    return true;
  }

  /** Like {@link check}, but an empty value is accepted (optional fields). */
  optional(field: string, value: string | undefined, ...checkers: Checker[]): boolean {
    return value === undefined || value === "" ? true : this.check(field, value, ...checkers);
  }

  /** Checks every element of a list, naming each as `field[i]`, and reports duplicates. */
  each(field: string, values: readonly string[], ...checkers: Checker[]): void {
    const seen = new Set<string>();
    values.forEach((v, i) => {
      if (this.check(`${field}[${i}]`, v, ...checkers) && seen.has(v)) {
        this.add(`${field}[${i}]`, `"${v}" is listed twice`);
      }
      seen.add(v);
    });
  }

  /** Records a problem when an enum value is not one of the defined numbers (open proto3 enums accept any). */
  enumValue(
    field: string,
    value: number,
    defined: readonly number[],
    options: { allowZero?: boolean; hint?: string } = {},
  ) {
    if (value === 0 && !options.allowZero) {
      this.add(field, options.hint ?? "must be set");
    } else if (value !== 0 && !defined.includes(value)) {
      this.add(field, `${value} is not a known value`);
    }
  }
}
