/**
 * Server-side validation of Polkit and Firewalld content against the shared hostile corpus: every string field
 * that reaches generated JavaScript or zone XML either is refused with the field named, or is rendered inert:
 * the polkit file is still exactly the expected `polkit.addRule` calls in printable ASCII, and the zone XML
 * parses back to the same value. (The agent repeats the same checks; see tests/agent/polkit_test.ts and
 * firewalld_test.ts.)
 */
import assert from "node:assert/strict";
import { fromJsonString } from "@bufbuild/protobuf";
import { PolkitPolicySchema } from "../../shared/gen/svc/policy/v1/polkit_pb.ts";
import { validatePolicyContent } from "../../shared/policy_types/mod.ts";
import { renderPolkitRules } from "../../shared/polkit_js.ts";
import { checkPolkitScript } from "../../agent/enforcers/polkit_script.ts";
import { parseXml, serializeXml } from "../../agent/xml.ts";
import { HOSTILE_STRINGS } from "../helpers/hostile_strings.ts";

const POLKIT_PLACES: [string, (v: string) => unknown][] = [
  ["rules[0].name", (v) => ({ name: v })],
  ["rules[0].description", (v) => ({ description: v })],
  ["rules[0].action_ids[0]", (v) => ({ action_ids: [v] })],
  ["rules[0].action_prefixes[0]", (v) => ({ action_ids: [], action_prefixes: [v] })],
  ["rules[0].match.unix_users[0]", (v) => ({ match: { unix_users: [v] } })],
  ["rules[0].match.unix_groups[0]", (v) => ({ match: { unix_groups: [v] } })],
  ["rules[0].match.exclude_unix_users[0]", (v) => ({ match: { exclude_unix_users: [v] } })],
  ["rules[0].action_conditions[0].key", (v) => ({ action_conditions: [{ key: v, value: "x" }] })],
  ["rules[0].action_conditions[0].value", (v) => ({ action_conditions: [{ key: "k", value: v }] })],
];

Deno.test("Polkit: hostile strings in every field are refused naming the field, or inert in the generated file", () => {
  let refused = 0;
  let total = 0;
  for (const h of HOSTILE_STRINGS) {
    for (const [field, place] of POLKIT_PLACES) {
      const value = `a${h.value}`;
      const rule = {
        name: "r",
        action_ids: ["org.example.a"],
        result: "POLKIT_RESULT_YES",
        ...place(value) as object,
      };
      const content = JSON.stringify({ rules: [rule] });
      total++;
      const issues = validatePolicyContent("Polkit", content);
      if (issues.length > 0) {
        refused++;
        assert.ok(
          issues.some((i) => i.field === field || i.field === "" || field.startsWith(i.field)),
          `${h.name} in ${field}: ${JSON.stringify(issues)}`,
        );
        continue;
      }
      const text = renderPolkitRules(fromJsonString(PolkitPolicySchema, content), {
        policyId: "p",
        policyName: value,
      });
      checkPolkitScript(text, 1);
      assert.match(text, /^[\x20-\x7e\n]*$/, `${h.name} in ${field} leaves printable ASCII only`);
    }
  }
  assert.ok(refused > total / 2, `${refused} of ${total} refused`);
});

const FIREWALLD_PLACES: [string, (v: string) => unknown][] = [
  ["zones[0].name", (v) => ({ name: v })],
  ["zones[0].services[0]", (v) => ({ services: [v] })],
  ["zones[0].protocols[0]", (v) => ({ protocols: [v] })],
  ["zones[0].icmp_blocks[0]", (v) => ({ icmp_blocks: [v] })],
  ["zones[0].sources[0]", (v) => ({ sources: [v] })],
  ["zones[0].interfaces[0]", (v) => ({ interfaces: [v] })],
  ["zones[0].ports[0].port", (v) => ({ ports: [{ port: v, protocol: "tcp" }] })],
  [
    "zones[0].forward_ports[0].to_addr",
    (v) => ({ forward_ports: [{ port: "80", protocol: "tcp", to_addr: v }] }),
  ],
  ["zones[0].short", (v) => ({ short: v })],
  ["zones[0].description", (v) => ({ description: v })],
];

Deno.test("Firewalld: hostile strings in every field are refused naming the field, or inert in zone XML", () => {
  let refused = 0;
  let total = 0;
  for (const h of HOSTILE_STRINGS) {
    for (const [field, place] of FIREWALLD_PLACES) {
      const value = `a${h.value}`;
      total++;
      const issues = validatePolicyContent(
        "Firewalld",
        JSON.stringify({ zones: [{ name: "z", ...place(value) as object }] }),
      );
      if (issues.length > 0) {
        refused++;
        assert.ok(
          issues.some((i) => i.field === field || i.field === "" || field.startsWith(i.field)),
          `${h.name} in ${field}: ${JSON.stringify(issues)}`,
        );
        continue;
      }
      // Accepted: only free text (short, description) may hold markup; the XML writer keeps it text.
      const xml = serializeXml({ name: "zone", children: [{ name: "description", text: value }] });
      assert.equal(parseXml(xml).children[0].text, value, `${h.name} in ${field} round-trips as text`);
      if (!field.endsWith("short") && !field.endsWith("description")) {
        assert.match(value, /^[A-Za-z0-9._+:\/-]*$/, `${h.name} accepted in ${field}`);
      }
    }
  }
  assert.ok(refused > total / 2, `${refused} of ${total} refused`);
});

Deno.test("Polkit and Firewalld: huge lists are refused by the content limits before any rendering", () => {
  const many = Array.from({ length: 200_000 }, (_, i) => `s${i}`);
  const polkit = validatePolicyContent(
    "Polkit",
    JSON.stringify({ rules: [{ name: "r", action_ids: many, result: "POLKIT_RESULT_YES" }] }),
  );
  assert.match(polkit.map((i) => i.message).join(" "), /too large/);
  const firewalld = validatePolicyContent(
    "Firewalld",
    JSON.stringify({ zones: [{ name: "z", services: many }] }),
  );
  assert.match(firewalld.map((i) => i.message).join(" "), /too large/);
});

Deno.test("DiskEncryption: cipher names in LUKS2 and LUKS1 notation are allowed, anything else refused by name", () => {
  const issuesFor = (cipher: string) =>
    validatePolicyContent("DiskEncryption", JSON.stringify({ allowed_ciphers: [cipher] }));
  for (
    const ok of ["aes-xts-plain64", "aes-cbc-essiv:sha256", "serpent-xts-plain64", "twofish-cbc-essiv:sha512"]
  ) {
    assert.deepEqual(issuesFor(ok), [], ok);
  }
  for (
    const bad of ["aes-cbc-essiv:", "aes:sha256:sha1", "aes-cbc-essiv:sha256;rm", "-aes", "aes xts", "AES:"]
  ) {
    const issues = issuesFor(bad);
    assert.equal(issues.length, 1, bad);
    assert.match(issues[0].field, /^allowed_ciphers\[0\]$/);
    assert.match(issues[0].message, /cryptsetup notation/);
  }
});
