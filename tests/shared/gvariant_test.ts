/**
 * The shared GVariant reader and printer: typed parsing, canonical printing, type-aware comparison, refusal
 * of anything that could leave a keyfile line; and a cross-check with GLib itself (through the real
 * `dconf compile` + `dconf dump`): what we print, GLib reads as the same value.
 */
import assert from "node:assert/strict";
import {
  canonicalGVariant,
  formatGVariant,
  GVariantError,
  gvariantProblem,
  gvariantSyntaxProblem,
  gvariantTextEquals,
  parseGVariant,
} from "../../shared/gvariant.ts";

Deno.test("gvariant: values typed by the key's type print canonically", () => {
  const cases: [string, string | undefined, string][] = [
    ["300", "u", "uint32 300"],
    ["uint32 300", undefined, "uint32 300"],
    ["'Adwaita'", undefined, "'Adwaita'"],
    ['"it\'s"', undefined, "'it\\'s'"],
    ["[]", "as", "@as []"],
    ["['a','b']", undefined, "['a', 'b']"],
    ["{'a': <1>}", "a{sv}", "{'a': <1>}"],
    ["(1, 'x')", undefined, "(1, 'x')"],
    ["2", "d", "2.0"],
    ["nothing", "ms", "@ms nothing"],
    ["0x10", "y", "byte 16"],
    ["-5", "x", "int64 -5"],
    ["'/org/a'", "o", "objectpath '/org/a'"],
    ["[uint32 1, 2]", undefined, "@au [1, 2]"],
    ["'line\\nbreak'", undefined, "'line\\nbreak'"],
  ];
  for (const [text, type, want] of cases) assert.equal(canonicalGVariant(text, type), want, text);
});

Deno.test("gvariant: type-aware comparison", () => {
  assert.ok(gvariantTextEquals("300", "uint32 300", "u"));
  assert.ok(gvariantTextEquals("uint32 300", "300"));
  assert.ok(gvariantTextEquals("'a'", '"a"'));
  assert.ok(!gvariantTextEquals("300", "uint32 300"), "int32 300 is not uint32 300 without a key type");
  assert.ok(!gvariantTextEquals("uint32 300", "uint32 301"));
  assert.ok(!gvariantTextEquals("'a", "'a"), "unparseable text is never equal");
});

Deno.test("gvariant: malformed, mistyped and hostile text is refused with the reason", () => {
  const bad: [string, string | undefined, RegExp][] = [
    ["'abc", undefined, /unterminated string/],
    ["1\n[org/evil]\nk=1", undefined, /control character U\+000A/],
    ["'a\u0000b'", undefined, /control character U\+0000/],
    ["[1,", undefined, /value expected/],
    ["300 x", undefined, /unexpected text/],
    ["uint32 -1", undefined, /out of range/],
    ["256", "y", /out of range/],
    ["Adwaita", undefined, /strings need quotes/],
    ["[1, 'a']", undefined, /expected a value of type i/],
    ["[]", undefined, /empty array/],
    ["'x'", "u", /expected a value of type u/],
    ["'not a path'", "o", /object path/],
    ["[".repeat(100) + "]".repeat(100), undefined, /nested too deeply/],
    ["'" + "x".repeat(70_000) + "'", undefined, /longer than/],
  ];
  for (const [text, type, re] of bad) {
    assert.throws(
      () => parseGVariant(text, type),
      (e: unknown) => e instanceof GVariantError && re.test(e.message),
      text,
    );
  }
  assert.equal(gvariantSyntaxProblem("[]"), undefined, "syntax alone does not need the type");
  assert.match(gvariantProblem("[]")!, /is not a valid GVariant value/);
});

const haveDconf = await new Deno.Command("sh", { args: ["-c", "command -v dconf"] }).output().then((o) =>
  o.success
);
if (!haveDconf) console.log("skipped: GLib round trip of GVariant text needs dconf (dconf-cli)");

Deno.test({
  name: "gvariant: GLib (dconf compile + dump) reads our canonical text as the same typed value",
  ignore: !haveDconf,
  async fn() {
    const values: [string, string | undefined][] = [
      ["300", "u"],
      ["[]", "as"],
      ["nothing", "ms"],
      ["just nothing", "mms"],
      ["0x10", "y"],
      ["{'a': <uint32 1>, 'b': <'x'>}", "a{sv}"],
      ["(1, 'x', [true])", "(isab)"],
      ["'it\\'s \\\\ \\t ünï'", undefined],
      ["1.5", undefined],
      ["-9223372036854775808", "x"],
      ["18446744073709551615", "t"],
      ["'/org/a'", "o"],
      ["'a{sv}'", "g"],
      ["[(1, 2)]", "a(ii)"],
    ];
    const dir = await Deno.makeTempDir();
    try {
      await Deno.mkdir(`${dir}/db.d`);
      const lines = values.map(([text, type], i) => `k${i}=${canonicalGVariant(text, type)}`);
      await Deno.writeTextFile(`${dir}/db.d/x`, `[t]\n${lines.join("\n")}\n`);
      const compile = await new Deno.Command("dconf", { args: ["compile", `${dir}/db`, `${dir}/db.d`] })
        .output();
      assert.ok(compile.success, new TextDecoder().decode(compile.stderr));
      await Deno.writeTextFile(`${dir}/profile`, `user-db:user\nfile-db:${dir}/db\n`);
      const dump = await new Deno.Command("dconf", {
        args: ["dump", "/t/"],
        env: { DCONF_PROFILE: `${dir}/profile`, XDG_CONFIG_HOME: dir },
      }).output();
      const out = new TextDecoder().decode(dump.stdout);
      const read = new Map(
        out.split("\n").filter((l) => /^k\d+=/.test(l)).map((
          l,
        ) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
      );
      values.forEach(([text, type], i) => {
        const want = parseGVariant(text, type);
        const glib = read.get(`k${i}`);
        assert.ok(glib !== undefined, `GLib has no k${i} in ${out}`);
        assert.equal(
          formatGVariant(parseGVariant(glib, want.type)),
          formatGVariant(want),
          `${text} vs GLib ${glib}`,
        );
      });
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
