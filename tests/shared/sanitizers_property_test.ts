/**
 * Property tests of every sanitizer in shared/policy_types/sanitizers.ts. Generated strings mix ordinary
 * text with every control, separator, quote and markup class of the shared hostile corpus and with arbitrary
 * UTF-16 code units; each sanitizer must agree with an oracle written here without its regular expressions:
 * - every single-line checker refuses C0/C1 controls, DEL, CR/LF, U+0085/U+2028/U+2029, bidi controls and lone
 *   surrogates wherever they sit in an otherwise valid value;
 * - checkers with a fixed alphabet refuse every value with a character outside it, and accept generated
 *   values of their documented form;
 * - path checkers never accept a value that leaves its directory.
 */
import assert from "node:assert/strict";
import { richRuleProblem } from "../../shared/firewalld_rich_rule.ts";
import { kconfigGroupProblem, kconfigKeyProblem } from "../../shared/kconfig_format.ts";
import { posix } from "node:path";
import fc from "fast-check";
import {
  absolutePathUnder,
  base64Text,
  type Checker,
  cidr,
  clockTime,
  dconfKeyName,
  dconfPath,
  fileNameComponent,
  firewalldName,
  firewalldSource,
  firewalldZoneName,
  flatpakAppId,
  gsettingsSchemaId,
  gvariantText,
  identifier,
  interfaceName,
  ipAddress,
  kconfigName,
  matches,
  maxLength,
  multiLineText,
  noNul,
  oneOf,
  polkitActionId,
  portProtocol,
  portSpec,
  required,
  singleLine,
  timeZoneName,
  unixGroupName,
  unixUserName,
  urlWithScheme,
} from "../../shared/policy_types/sanitizers.ts";
import {
  embedded,
  HOSTILE_CLASSES,
  HOSTILE_STRINGS,
  hostileStringArbitrary,
  hostileStrings,
  INVISIBLE_OR_INVALID,
  LINE_BREAKING,
} from "../helpers/hostile_strings.ts";

const RUNS = { numRuns: 300 };

/** A single UTF-16 code unit anywhere in U+0000–U+FFFF (lone surrogates included). */
const anyCodeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));
/** Arbitrary UTF-16 text, hostile pieces mixed in. */
const anyText = fc.oneof(
  fc.array(anyCodeUnit, { maxLength: 40 }).map((a) => a.join("")),
  hostileStringArbitrary(),
  fc.string({ unit: "binary", maxLength: 40 }),
);

/** True when `ch` (one UTF-16 unit at index `i` of `s`) is a half of a surrogate pair without its partner. */
function loneSurrogateAt(s: string, i: number): boolean {
  const c = s.charCodeAt(i);
  if (c >= 0xd800 && c <= 0xdbff) {
    const n = s.charCodeAt(i + 1);
    return !(n >= 0xdc00 && n <= 0xdfff);
  }
  if (c >= 0xdc00 && c <= 0xdfff) {
    const p = s.charCodeAt(i - 1);
    return !(p >= 0xd800 && p <= 0xdbff);
  }
  return false;
}

/** Oracle: does `s` contain a character that may not appear in one line of text? */
function hasLineBreakingOrInvisible(s: string, allowNewlineTab = false): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (allowNewlineTab && (c === 0x0a || c === 0x09)) continue;
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return true;
    if (c === 0x2028 || c === 0x2029) return true;
    if ((c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069)) return true;
    if (loneSurrogateAt(s, i)) return true;
  }
  return false;
}

/** Every checker that guards a one-line value, with one valid example to embed hostile text into. */
const SINGLE_LINE_CHECKERS: [string, Checker, string][] = [
  ["singleLine", singleLine, "plain text"],
  ["identifier(64)", identifier(64), "repo-1"],
  ["fileNameComponent", fileNameComponent, "svc.conf"],
  ["absolutePathUnder", absolutePathUnder(["/etc/svc/"]), "/etc/svc/a.conf"],
  ["urlWithScheme", urlWithScheme(["https"]), "https://a.example/path"],
  ["unixUserName", unixUserName, "alice"],
  ["unixGroupName", unixGroupName, "domain users"],
  ["gsettingsSchemaId", gsettingsSchemaId, "org.gnome.desktop"],
  ["dconfKeyName", dconfKeyName, "lock-delay"],
  ["dconfPath", dconfPath, "/org/gnome/desktop/"],
  ["gvariantText", gvariantText, "'Adwaita'"],
  ["polkitActionId", polkitActionId, "org.freedesktop.udisks2.filesystem-mount"],
  ["firewalldZoneName", firewalldZoneName, "public"],
  ["firewalldName", firewalldName, "ssh"],
  ["portSpec", portSpec, "5000-6000"],
  ["portProtocol", portProtocol, "tcp"],
  ["ipAddress", ipAddress, "10.0.0.1"],
  ["cidr", cidr, "10.0.0.0/8"],
  ["firewalldSource", firewalldSource, "10.0.0.0/8"],
  ["interfaceName", interfaceName, "eth0"],
  ["richRuleProblem", richRuleProblem, 'rule service name="ssh" accept'],
  ["clockTime", clockTime, "08:30"],
  ["timeZoneName", timeZoneName, "Europe/Berlin"],
  ["flatpakAppId", flatpakAppId, "org.mozilla.firefox"],
  ["kconfigName", kconfigName, "General"],
  ["matches", matches(/^[a-z ]+$/, "lowercase words"), "ab cd"],
  ["oneOf", oneOf(["alpha beta"]), "alpha beta"],
];

/** Checkers with a fixed alphabet: any character outside it must be refused. */
const ALPHABETS: [string, Checker, RegExp, fc.Arbitrary<string>][] = [
  [
    "identifier(64)",
    identifier(64),
    /^[A-Za-z0-9._-]*$/,
    fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/),
  ],
  [
    "fileNameComponent",
    fileNameComponent,
    /^[A-Za-z0-9._-]*$/,
    fc.stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,100}$/),
  ],
  ["unixUserName", unixUserName, /^[A-Za-z0-9_.@$-]*$/, fc.stringMatching(/^[a-z_][a-z0-9_.@-]{0,30}\$?$/)],
  [
    "unixGroupName",
    unixGroupName,
    /^[A-Za-z0-9_.@$ -]*$/,
    fc.stringMatching(/^[a-z_]([a-z0-9_. -]{0,30}[a-z0-9])?$/),
  ],
  [
    "gsettingsSchemaId",
    gsettingsSchemaId,
    /^[A-Za-z0-9_.-]*$/,
    fc.stringMatching(/^[a-z][a-z0-9-]{0,10}(\.[a-z0-9_-]{1,10}){1,5}$/),
  ],
  ["dconfKeyName", dconfKeyName, /^[A-Za-z0-9_-]*$/, fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,40}$/)],
  [
    "dconfPath",
    dconfPath,
    /^[A-Za-z0-9_.:/-]*$/,
    fc.stringMatching(/^\/([a-z0-9_:-][a-z0-9_.:-]{0,10}\/){1,6}$/),
  ],
  [
    "polkitActionId",
    polkitActionId,
    /^[A-Za-z0-9._-]*$/,
    fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,60}$/),
  ],
  [
    "firewalldZoneName",
    firewalldZoneName,
    /^[A-Za-z0-9][A-Za-z0-9_-]*$/,
    fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_-]{0,16}$/),
  ],
  ["firewalldName", firewalldName, /^[A-Za-z0-9._+-]*$/, fc.stringMatching(/^[a-z0-9][a-z0-9._+-]{0,30}$/)],
  [
    "portSpec",
    portSpec,
    /^[0-9-]*$/,
    fc.tuple(fc.integer({ min: 1, max: 65535 }), fc.integer({ min: 0, max: 1000 }))
      .map(([lo, n]) => (lo + n <= 65535 && n > 0 ? `${lo}-${lo + n}` : `${lo}`)),
  ],
  ["ipAddress", ipAddress, /^[0-9A-Fa-f:.]*$/, fc.oneof(fc.ipV4(), fc.ipV6())],
  [
    "cidr",
    cidr,
    /^[0-9A-Fa-f:./]*$/,
    fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 })).map(([a, p]) => `${a}/${p}`),
  ],
  [
    "firewalldSource",
    firewalldSource,
    /^[0-9A-Za-z:./_-]*$/,
    fc.oneof(
      fc.ipV4(),
      fc.stringMatching(/^ipset:[a-z0-9_.-]{1,20}$/),
      fc.stringMatching(/^mac:([0-9a-f]{2}:){5}[0-9a-f]{2}$/),
    ),
  ],
  ["interfaceName", interfaceName, /^[A-Za-z0-9_.@:-]*$/, fc.stringMatching(/^[a-z0-9][a-z0-9_.@:-]{0,14}$/)],
  [
    "clockTime",
    clockTime,
    /^[0-9:]*$/,
    fc.tuple(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 }))
      .map(([h, m]) => `${String(h).padStart(2, "0")}:${String(m).padStart(2, "0")}`),
  ],
  [
    "timeZoneName",
    timeZoneName,
    /^[A-Za-z0-9_+/-]*$/,
    fc.stringMatching(/^[A-Z][a-z_]{1,12}(\/[A-Z][a-z_]{1,12}){0,2}$/),
  ],
  [
    "flatpakAppId",
    flatpakAppId,
    /^[A-Za-z0-9_.-]*$/,
    fc.stringMatching(/^[a-z_][a-z0-9_-]{0,10}(\.[a-z_][a-z0-9_-]{0,10}){2,4}$/),
  ],
];

Deno.test("the hostile corpus covers every class, has unique names and every entry is as labelled", () => {
  const names = HOSTILE_STRINGS.map((h) => h.name);
  assert.equal(new Set(names).size, names.length, "names are unique");
  for (const cls of HOSTILE_CLASSES) assert.ok(hostileStrings(cls).length > 0, cls);
  for (let code = 0; code < 0x20; code++) {
    assert.ok(
      HOSTILE_STRINGS.some((h) => h.value === String.fromCharCode(code)),
      `C0 U+${code.toString(16)}`,
    );
  }
  for (let code = 0x7f; code < 0xa0; code++) {
    assert.ok(HOSTILE_STRINGS.some((h) => h.value === String.fromCharCode(code)), `U+${code.toString(16)}`);
  }
  for (const h of hostileStrings(...LINE_BREAKING, ...INVISIBLE_OR_INVALID)) {
    assert.ok(hasLineBreakingOrInvisible(h.value), `${h.name} is really line-breaking or invisible`);
  }
});

Deno.test("identifier() refuses control characters (the `a ?? b ? x : y` slip)", () => {
  const check = identifier(64);
  for (const bad of ["a\nb", "a\rb", "rule\u001b[31m", "a\tb", "a\u007f", "name\u2028x", "a\u0000"]) {
    assert.match(check(bad) ?? "accepted", /must not contain/, JSON.stringify(bad));
  }
  assert.equal(check("org.example-1_a"), undefined);
  assert.match(check("-a") ?? "accepted", /must start with a letter or digit/);
});

Deno.test("every single-line checker refuses line-breaking, invisible and invalid characters anywhere", () => {
  const breaking = hostileStrings(...LINE_BREAKING, ...INVISIBLE_OR_INVALID);
  for (const [name, check, valid] of SINGLE_LINE_CHECKERS) {
    assert.equal(check(valid), undefined, `${name} accepts its example ${JSON.stringify(valid)}`);
    for (const h of breaking) {
      for (const value of embedded(h, valid)) {
        assert.ok(check(value), `${name} refuses ${h.name} in ${JSON.stringify(value)}`);
      }
    }
    fc.assert(
      fc.property(
        hostileStringArbitrary(...LINE_BREAKING, ...INVISIBLE_OR_INVALID),
        fc.nat(),
        (hostile, at) => {
          const i = at % (valid.length + 1);
          const value = valid.slice(0, i) + hostile + valid.slice(i);
          const problem = check(value);
          return typeof problem === "string" && problem.length > 0;
        },
      ),
      { ...RUNS, numRuns: 150 },
    );
  }
});

Deno.test("singleLine and multiLineText agree with a code-unit oracle on arbitrary UTF-16", () => {
  fc.assert(
    fc.property(anyText, (s) => {
      assert.equal(singleLine(s) !== undefined, hasLineBreakingOrInvisible(s), JSON.stringify(s));
      assert.equal(multiLineText(s) !== undefined, hasLineBreakingOrInvisible(s, true), JSON.stringify(s));
      assert.equal(noNul(s) !== undefined, s.includes("\0"));
    }),
    { numRuns: 2000 },
  );
  assert.equal(multiLineText("line one\n\tline two"), undefined);
  assert.match(multiLineText("a\r\nb") ?? "", /carriage return/);
  assert.match(multiLineText("a\u2028b") ?? "", /line separator U\+2028/);
  assert.match(multiLineText("a\u0085b") ?? "", /line separator U\+0085/);
  assert.match(singleLine("\udc00") ?? "", /lone UTF-16 surrogate U\+DC00/);
  assert.match(singleLine("a\u202eb") ?? "", /bidirectional text control U\+202E/);
  assert.equal(singleLine("emoji \u{1f600} and 中文"), undefined, "paired surrogates and CJK are text");
});

Deno.test("checkers with a fixed alphabet refuse every other character and accept their documented form", () => {
  for (const [name, check, alphabet, valid] of ALPHABETS) {
    fc.assert(
      fc.property(valid, (v) => {
        assert.equal(check(v), undefined, `${name} accepts ${JSON.stringify(v)}`);
      }),
      RUNS,
    );
    fc.assert(
      fc.property(anyText, (s) => {
        if (!alphabet.test(s)) assert.ok(check(s), `${name} refuses ${JSON.stringify(s)}`);
      }),
      RUNS,
    );
    for (const h of HOSTILE_STRINGS) {
      if (h.value === "" || alphabet.test(h.value)) continue;
      assert.ok(check(h.value), `${name} refuses ${h.name}`);
    }
  }
});

Deno.test("quotes, markup, shell and INI structure never pass a fixed-alphabet checker", () => {
  const structural = hostileStrings("quote", "backslash", "markup", "shell", "ini");
  for (const [name, check, , valid] of ALPHABETS) {
    const example = fc.sample(valid, { numRuns: 1, seed: 7 })[0];
    for (const h of structural) {
      for (const value of embedded(h, example)) {
        // `.`, `-`, `:` and `/` are legitimate inside some alphabets; everything else in these classes is not.
        if (
          /^[A-Za-z0-9._:/-]*$/.test(value) || (name === "unixGroupName" && /^[a-z0-9 ._-]+$/.test(value))
        ) {
          continue;
        }
        assert.ok(check(value), `${name} refuses ${h.name} in ${JSON.stringify(value)}`);
      }
    }
  }
});

Deno.test("path checkers never let a value leave its directory", () => {
  const under = absolutePathUnder(["/etc/svc/"]);
  const segment = fc.oneof(
    fc.constantFrom("..", ".", "", "a", "b.conf", "..."),
    hostileStringArbitrary("path"),
  );
  fc.assert(
    fc.property(fc.array(segment, { minLength: 1, maxLength: 6 }), (parts) => {
      const value = "/etc/svc/" + parts.join("/");
      if (under(value) === undefined) {
        assert.ok(posix.normalize(value).startsWith("/etc/svc/"), value);
        assert.equal(posix.normalize(value), value, `${value} is already normal`);
      }
      const name = parts.join("/");
      if (fileNameComponent(name) === undefined) {
        assert.ok(!name.includes("/") && name !== "." && name !== "..", name);
      }
      if (dconfPath(`/${name}/`) === undefined) {
        assert.ok(!`/${name}/`.split("/").some((p) => p === ".." || p === "."), name);
      }
      if (timeZoneName(name) === undefined) assert.ok(!name.split("/").includes(".."), name);
    }),
    { numRuns: 1000 },
  );
  for (const h of hostileStrings("path")) {
    assert.ok(fileNameComponent(h.value), `fileNameComponent refuses ${h.name}`);
    assert.ok(under(`/etc/svc/${h.value}`) === undefined ? !h.value.includes("..") : true, h.name);
  }
});

Deno.test("length limits hold for every over-long entry", () => {
  for (const h of hostileStrings("over-long")) {
    assert.ok(fileNameComponent(h.value.replace(/[^a]/gu, "a")) || h.value.length <= 255, h.name);
    assert.ok(identifier(64)(h.value), `identifier refuses ${h.name}`);
    assert.ok(maxLength(255)(h.value), `maxLength(255) refuses ${h.name}`);
    assert.ok(dconfKeyName(h.value), `dconfKeyName refuses ${h.name}`);
    assert.ok(firewalldZoneName(h.value), `firewalldZoneName refuses ${h.name}`);
    assert.ok(interfaceName(h.value), `interfaceName refuses ${h.name}`);
    assert.ok(timeZoneName(h.value), `timeZoneName refuses ${h.name}`);
  }
  fc.assert(
    fc.property(
      fc.string({ unit: "binary", minLength: 0, maxLength: 80 }),
      fc.integer({ min: 1, max: 60 }),
      (s, n) => {
        assert.equal(maxLength(n)(s) === undefined, [...s].length <= n);
        assert.equal(required(s) === undefined, s.length > 0);
      },
    ),
    RUNS,
  );
});

Deno.test("gvariantText: accepted values are one line with every quote closed and brackets balanced", () => {
  const piece = fc.oneof(
    fc.constantFrom("'", '"', "\\", "[", "]", "(", ")", "{", "}", "<", ">", ",", " ", "a", "1", "uint32 "),
    hostileStringArbitrary("quote", "newline", "unicode-line-separator", "ini", "markup"),
  );
  fc.assert(
    fc.property(fc.array(piece, { maxLength: 12 }).map((a) => a.join("")), (s) => {
      if (gvariantText(s) !== undefined) return;
      assert.ok(!hasLineBreakingOrInvisible(s), JSON.stringify(s));
      // Outside quotes, brackets nest; inside, a backslash escapes the next character.
      const stack: string[] = [];
      let quote = "";
      for (let i = 0; i < s.length; i++) {
        const ch = s[i];
        if (quote) {
          if (ch === "\\") i++;
          else if (ch === quote) quote = "";
        } else if (ch === "'" || ch === '"') quote = ch;
        else if ("([{<".includes(ch)) stack.push(ch);
        else if (")]}>".includes(ch)) {
          assert.equal("([{<"[")]}>".indexOf(ch)], stack.pop(), JSON.stringify(s));
        }
      }
      assert.equal(quote, "", `quote closed in ${JSON.stringify(s)}`);
      assert.equal(stack.length, 0, `brackets balanced in ${JSON.stringify(s)}`);
    }),
    { numRuns: 2000 },
  );
  assert.ok(gvariantText("'x'\n[org/evil]\nk=1"));
  assert.ok(gvariantText("'x\u2028y'"));
});

Deno.test("kconfigName never carries a group, key or line break", () => {
  fc.assert(
    fc.property(anyText, (s) => {
      if (kconfigName(s) !== undefined) return;
      assert.ok(!/[[\]=]/.test(s) && !hasLineBreakingOrInvisible(s) && s.trim() === s && s !== "", s);
    }),
    { numRuns: 2000 },
  );
  for (const h of hostileStrings("ini")) {
    if (/[[\]=]/.test(h.value)) assert.ok(kconfigName(`a${h.value}b`), h.name);
  }
});

Deno.test("base64Text accepts wrapped base64 and nothing else, in linear time", () => {
  const b64 = fc.uint8Array({ minLength: 1, maxLength: 200 }).map((bytes) =>
    btoa(String.fromCharCode(...bytes))
  );
  fc.assert(
    fc.property(b64, fc.integer({ min: 4, max: 76 }), (text, width) => {
      const wrapped = text.match(new RegExp(`.{1,${width}}`, "g"))!.join("\n") + "\n";
      assert.equal(base64Text(wrapped), undefined);
    }),
    RUNS,
  );
  fc.assert(
    fc.property(anyText, (s) => {
      if (base64Text(s) !== undefined) return;
      const compact = s.replace(/[ \t\r\n]/g, "");
      assert.ok(/^[A-Za-z0-9+/]+={0,2}$/.test(compact), JSON.stringify(s));
    }),
    { numRuns: 2000 },
  );
  for (
    const h of hostileStrings(
      "unicode-line-separator",
      "c1",
      "nul",
      "bidi",
      "lone-surrogate",
      "quote",
      "shell",
    )
  ) {
    assert.ok(base64Text(`YWJj${h.value}ZA==`), h.name);
  }
  // Long whitespace runs made the old pattern backtrack quadratically; this finishes at once now.
  assert.ok(base64Text(" ".repeat(200_000) + "!"));
});

Deno.test("names that reach a command line never look like an option", () => {
  const checkers: [string, (v: string) => string | undefined][] = [
    ["firewalldZoneName", firewalldZoneName],
    ["firewalldName", firewalldName],
    ["kconfigGroupProblem", kconfigGroupProblem],
    ["kconfigKeyProblem", kconfigKeyProblem],
  ];
  for (const [name, check] of checkers) {
    for (const h of hostileStrings("option")) {
      assert.ok(check(h.value), `${name} refuses ${h.name}`);
    }
    fc.assert(
      fc.property(anyText, (s) => {
        if (s.startsWith("-")) assert.ok(check(s), `${name} refuses ${JSON.stringify(s)}`);
      }),
      RUNS,
    );
  }
});
