/**
 * Firewalld rich rules: parsed into a structure, every attribute value checked by its kind, unknown tokens
 * named; what parses renders (text and zone XML) exactly as firewalld itself reads and prints it (checked
 * with the real firewall-offline-cmd); the hostile corpus in every quoted value is refused or inert.
 */
import assert from "node:assert/strict";
import {
  canonicalRichRule,
  formatRichRule,
  parseRichRule,
  richRuleElement,
  richRuleProblem,
} from "../../shared/firewalld_rich_rule.ts";
import { firewalldType } from "../../shared/policy_types/firewalld.ts";
import { serializeXml, type XmlNode } from "../../agent/xml.ts";
import { HOSTILE_STRINGS } from "../helpers/hostile_strings.ts";

const VALID = [
  'rule family="ipv4" source address="10.0.0.0/8" service name="ssh" accept',
  "rule family=ipv6 source NOT address=2001:db8::/32 port port=22 protocol=tcp log prefix='ssh in' level=info limit value=3/minute reject type=icmp6-adm-prohibited",
  'rule priority="-5" family="ipv4" forward-port port="80" protocol="tcp" to-port="8080" to-addr="192.168.1.5"',
  "rule protocol value=gre accept",
  'rule service name="http" audit limit value="1/m" drop',
  "rule family=ipv4 source ipset=blocklist drop",
  "rule source mac=00:11:22:aa:bb:cc service name=ssh accept",
  "rule family=ipv4 destination address=192.168.0.1 icmp-block name=echo-request",
  "rule icmp-type name=echo-request log prefix=ping accept limit value=2/s",
  "rule family=ipv4 source address=10.1.1.1 masquerade",
  "rule source-port port=1024-2048 protocol=udp nflog group=3 prefix=np queue-size=10 drop",
  "rule service name=https mark set=0x10/0xff",
  "rule tcp-mss-clamp value=pmtu",
  "rule priority=100 family=ipv4 source address=10.0.0.0/8 log prefix=all level=warning",
];

Deno.test("rich rules: valid rules parse and print in firewalld's canonical form", () => {
  for (const text of VALID) {
    const canonical = canonicalRichRule(text);
    assert.equal(canonicalRichRule(canonical), canonical, "canonical text parses to itself");
    assert.equal(richRuleProblem(text), undefined, text);
  }
  assert.equal(
    canonicalRichRule(VALID[1]),
    'rule family="ipv6" source NOT address="2001:db8::/32" port port="22" protocol="tcp" log prefix="ssh in" level="info" limit value="3/m" reject type="icmp6-adm-prohibited"',
  );
  assert.equal(parseRichRule(VALID[6]).source?.mac, "00:11:22:AA:BB:CC");
});

Deno.test("rich rules: unknown tokens and wrong shapes are refused with the token named", () => {
  const cases: [string, RegExp][] = [
    ['rule exec cmd="rm"', /unknown token "exec"/],
    ['rule service name="ssh" accept foo', /unknown token "foo"/],
    ['rule service name="ssh" accept; id', /unknown token "accept;"/],
    ['rule family="ipv4" bogus="1" accept', /bogus= is not an attribute of "rule"/],
    ['rule service name="ssh" prefix="x" accept', /prefix= does not belong to "service"/],
    ['rule service name="ssh accept', /no closing "/],
    ["rule family=ipv4", /needs a match element .* or an action/],
    ['service name="ssh" accept', /must start with "rule"/],
    ['rule service name="ssh" service name="http" accept', /at most one match element/],
    ['rule service name="ssh" accept drop', /at most one action/],
    ['rule source address="10.0.0.1" accept', /needs rule family/],
    ['rule family="ipv6" source address="10.0.0.1" accept', /not an ipv6 address/],
    [
      'rule family="ipv4" forward-port port="80" protocol="tcp" to-port="81" accept',
      /cannot be combined with an action/,
    ],
    ['rule service name="ssh" reject type="tcp-reset"', /reject type= needs rule family/],
    ['rule family="ipv4" service name="ssh" reject type="bogus"', /not an ipv4 reject type/],
    ['rule service name="ssh" accept limit value="0/m"', /at least 1/],
    ['rule service name="ssh" accept limit value="1/d"', /too slow/],
    ['rule priority="99999" service name="ssh" accept', /priority .* from -32768 to 32767/],
    ['rule service name="ssh" log level="loud" accept', /log level "loud" must be one of/],
    ['rule family="ipv4" port port="70000" protocol="tcp" accept', /port "70000".*65535/],
    ['rule port port="22" protocol="icmp" accept', /protocol "icmp" must be one of/],
    ['rule service name="ssh" mark set="x"', /32-bit mark/],
    ['rule service name="ssh" audit', /audit" needs an accept, drop or reject/],
    [
      "rule service name=ssh accept\nrule service name=http accept",
      /one line of printable text: it must not contain a newline/,
    ],
  ];
  for (const [text, expected] of cases) {
    assert.match(richRuleProblem(text) ?? "accepted", expected, text);
  }
});

/** Where a hostile value can be placed inside quotes, and the kind of value that place holds. */
const PLACES: [string, (v: string) => string][] = [
  ["source address", (v) => `rule family="ipv4" source address="10.0.0.1${v}" accept`],
  ["source mac", (v) => `rule source mac="00:11:22:33:44:55${v}" accept`],
  ["source ipset", (v) => `rule source ipset="set${v}" accept`],
  ["destination address", (v) => `rule family="ipv4" destination address="${v}10.0.0.1" accept`],
  ["service name", (v) => `rule service name="ssh${v}" accept`],
  ["port port", (v) => `rule port port="22${v}" protocol="tcp" accept`],
  ["port protocol", (v) => `rule port port="22" protocol="tcp${v}" accept`],
  ["protocol value", (v) => `rule protocol value="gre${v}" accept`],
  ["icmp-block name", (v) => `rule icmp-block name="echo${v}"`],
  [
    "forward-port to-addr",
    (v) => `rule family="ipv4" forward-port port="80" protocol="tcp" to-addr="10.0.0.1${v}"`,
  ],
  ["forward-port to-port", (v) => `rule family="ipv4" forward-port port="80" protocol="tcp" to-port="8${v}"`],
  ["log prefix", (v) => `rule service name="ssh" log prefix="p${v}" accept`],
  ["log level", (v) => `rule service name="ssh" log level="info${v}" accept`],
  ["nflog group", (v) => `rule service name="ssh" nflog group="1${v}" accept`],
  ["limit value", (v) => `rule service name="ssh" accept limit value="3/m${v}"`],
  ["reject type", (v) => `rule family="ipv4" service name="ssh" reject type="tcp-reset${v}"`],
  ["mark set", (v) => `rule service name="ssh" mark set="1${v}"`],
  ["rule family", (v) => `rule family="ipv4${v}" service name="ssh" accept`],
  ["rule priority", (v) => `rule priority="1${v}" service name="ssh" accept`],
];

Deno.test("rich rules: the hostile corpus inside every quoted value is refused or inert", () => {
  let refused = 0;
  let total = 0;
  for (const [place, build] of PLACES) {
    for (const h of HOSTILE_STRINGS) {
      if (h.value === "") continue;
      total++;
      const text = build(h.value);
      const problem = richRuleProblem(text);
      if (problem !== undefined) {
        refused++;
        continue;
      }
      // Accepted: the value can only hold characters that end nothing (no quote, markup, escape, control).
      assert.match(h.value, /^[A-Za-z0-9 _.,:;\/+@#%()[\]-]*$/, `${place} accepted ${h.name}: ${text}`);
      if (!/^[A-Za-z0-9._:\/-]*$/.test(h.value)) {
        assert.equal(
          place,
          "log prefix",
          `${place} accepted ${h.name}: only free text may hold such characters`,
        );
      }
    }
  }
  assert.ok(refused / total > 0.95, `${refused} of ${total} refused`);
  // The values issue #21 found accepted are refused now.
  for (const v of ["</description><rule>", "`id`", "$(id)", '"', "'", "\\", "\u2028", "&", "</zone>", "*/"]) {
    for (const [place, build] of PLACES) {
      assert.ok(richRuleProblem(build(v)) !== undefined, `${place} accepted ${JSON.stringify(v)}`);
    }
  }
});

Deno.test("rich rules: the server's validator names the rule and the problem", () => {
  const message = firewalldType.parse(JSON.stringify({
    zones: [{ name: "public", rich_rules: [VALID[0], 'rule service name="</description><rule>" accept'] }],
  }));
  const issues = firewalldType.validate(message);
  assert.equal(issues.length, 1);
  assert.equal(issues[0].field, "zones[0].rich_rules[1]");
  assert.match(issues[0].message, /service name "<\/description><rule>" must be a name/);
});

const TOOL = (() => {
  try {
    return new Deno.Command("firewall-offline-cmd", { args: ["--version"] }).outputSync().success;
  } catch {
    return false;
  }
})();
if (!TOOL) {
  console.log("skipped: comparing with firewalld's own printer needs firewall-offline-cmd (firewalld)");
}

Deno.test({
  name:
    "rich rules: the rendered <rule> elements pass firewalld's --check-config and list back in canonical form",
  ignore: !TOOL,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "svc-rich-" });
    try {
      await Deno.mkdir(`${dir}/zones`);
      await Deno.copyFile("/etc/firewalld/firewalld.conf", `${dir}/firewalld.conf`);
      const rules = VALID.map(parseRichRule);
      const zone: XmlNode = { name: "zone", children: rules.map(richRuleElement) };
      await Deno.writeTextFile(`${dir}/zones/richtest.xml`, serializeXml(zone));
      const run = async (...args: string[]) => {
        const out = await new Deno.Command("firewall-offline-cmd", {
          args: ["--system-config", dir, ...args],
          stdout: "piped",
          stderr: "piped",
        }).output();
        return {
          ok: out.success,
          out: new TextDecoder().decode(out.stdout),
          err: new TextDecoder().decode(out.stderr),
        };
      };
      const check = await run("--check-config");
      assert.ok(check.ok, check.err);
      const listed = await run("--zone=richtest", "--list-rich-rules");
      assert.ok(listed.ok, listed.err);
      const printed = listed.out.split("\n").filter((l) => l.trim() !== "").sort();
      assert.deepEqual(printed, rules.map(formatRichRule).sort());
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
