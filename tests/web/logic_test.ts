/**
 * The web console's browser-independent rules: the client route table, the policy lifecycle it offers,
 * per-setting provenance, the generated forms' data model and documentation, the editors' coverage of the
 * registry, and the enrollment commands it shows.
 */
import assert from "node:assert/strict";
import { matchRoute } from "../../web/src/routes.ts";
import { lifecycleActions } from "../../web/src/lifecycle.ts";
import { computeProvenance, type ProvenancePolicy } from "../../web/src/provenance.ts";
import { contentToValue, valueAtKey } from "../../web/src/content.ts";
import { humanize, optionsFromDoc, setIn } from "../../web/src/editors/form_model.ts";
import { editorFor } from "../../web/src/editors/mod.ts";
import { enrollmentCommands } from "../../web/src/enrollment.ts";
import { parseProtoDocs, readProtoDocs } from "../../web/proto_docs.ts";
import { listPolicyTypes } from "../../shared/policy_types/mod.ts";

Deno.test("client routes: the spec's routes match, anything else does not", () => {
  const names = [
    "/",
    "/policies",
    "/policies/new",
    "/nodes",
    "/node-groups",
    "/policy-bindings",
    "/compliance",
    "/disk-encryption",
    "/audit-logs",
    "/settings",
  ].map((p) => matchRoute(p)?.name);
  assert.deepEqual(names, [
    "dashboard",
    "policies",
    "policy-new",
    "nodes",
    "node-groups",
    "policy-bindings",
    "compliance",
    "disk-encryption",
    "audit-logs",
    "settings",
  ]);
  const edit = matchRoute("/policies/a%20b/edit/", "?x=1");
  assert.equal(edit?.name, "policy-edit");
  assert.equal(edit?.params.policyId, "a b");
  assert.equal(edit?.query.get("x"), "1");
  for (
    const path of ["/policies/x", "/policies/x/edit/more", "/node", "/settingsx", "/api/v1/version", "//"]
  ) {
    assert.equal(matchRoute(path), undefined, path);
  }
});

Deno.test("lifecycle: only the spec's transitions are offered, and moving to draft explains its refusal", () => {
  assert.deepEqual(lifecycleActions({ state: "draft", enabled_bindings_count: 0 }).map((a) => a.target), [
    "released",
  ]);
  assert.deepEqual(lifecycleActions({ state: "draft", enabled_bindings_count: 0 })[0].permissions, [
    "policy:edit",
    "policy:release",
  ]);
  const released = lifecycleActions({ state: "released", enabled_bindings_count: 2 });
  assert.deepEqual(released.map((a) => a.target), ["archived", "draft"]);
  assert.equal(released[0].refusal, undefined);
  assert.equal(released[1].refusal, "2 enabled bindings deliver it; disable them first");
  const archived = lifecycleActions({ state: "archived", enabled_bindings_count: 1 });
  assert.deepEqual(archived.map((a) => a.target), ["draft"]);
  assert.equal(archived[0].refusal, "1 enabled binding delivers it; disable it first");
  assert.equal(lifecycleActions({ state: "archived", enabled_bindings_count: 0 })[0].refusal, undefined);
});

const ID_A = "00000000-0000-4000-8000-00000000000a";
const ID_B = "00000000-0000-4000-8000-00000000000b";
const ID_C = "00000000-0000-4000-8000-00000000000c";

function policy(
  id: string,
  priority: number,
  content: Record<string, unknown>,
  items: ProvenancePolicy["items"] = [],
) {
  return {
    id,
    name: `policy ${id.slice(-1)}`,
    type: "Firefox",
    priority,
    binding: { id: `binding-${id.slice(-1)}`, nodeGroupName: "lab" },
    content: content as ProvenancePolicy["content"],
    items,
  };
}

Deno.test("provenance: the agent's override report names the winner and what it overrode", () => {
  const overridden = `overridden by higher-priority policy "policy b" (${ID_B}, priority 5)`;
  const rows = computeProvenance([
    policy(ID_A, 1, { DisableTelemetry: false, DisablePocket: true }, [
      { schema_id: "policies.json", key: "DisableTelemetry", status: "inapplicable", message: overridden },
      {
        schema_id: "policies.json",
        key: "DisablePocket",
        status: "COMPLIANCE_STATUS_COMPLIANT",
        message: "set",
      },
    ]),
    policy(ID_B, 5, { DisableTelemetry: true }, [
      { schema_id: "policies.json", key: "DisableTelemetry", status: "compliant", message: "set to true" },
    ]),
  ]);
  const telemetry = rows.find((r) => r.key === "DisableTelemetry")!;
  assert.equal(telemetry.winner.policy.id, ID_B);
  assert.equal(telemetry.winner.value, true);
  assert.equal(telemetry.reported, true);
  assert.deepEqual(telemetry.overridden.map((o) => [o.policy.id, o.value]), [[ID_A, false]]);
  const pocket = rows.find((r) => r.key === "DisablePocket")!;
  assert.equal(pocket.winner.policy.id, ID_A);
  assert.equal(pocket.winner.status, "compliant");
  assert.deepEqual(pocket.overridden, []);
});

Deno.test("provenance: keys not reported yet are predicted with the agent's rule (priority, then lower id)", () => {
  const rows = computeProvenance([
    policy(ID_C, 3, { Homepage: { URL: "https://c.example" } }),
    policy(ID_B, 3, { Homepage: { URL: "https://b.example" } }),
    policy(ID_A, 1, { Homepage: { URL: "https://a.example" } }),
  ]);
  assert.equal(rows.length, 1);
  assert.equal(rows[0].winner.policy.id, ID_B, "equal priorities go to the lower id");
  assert.equal(rows[0].reported, false);
  assert.deepEqual(rows[0].overridden.map((o) => o.policy.id), [ID_C, ID_A]);
});

Deno.test("item keys are looked up in content, entry names with dots included", () => {
  const content = {
    ExtensionSettings: { "uBlock0@raymondhill.net": { installation_mode: "force_installed" } },
  };
  assert.deepEqual(valueAtKey(content, "ExtensionSettings.uBlock0@raymondhill.net"), {
    found: true,
    value: { installation_mode: "force_installed" },
  });
  assert.deepEqual(valueAtKey(content, "ExtensionSettings.other"), { found: false });
  assert.deepEqual(valueAtKey({ Homepage: { URL: "x" } }, "Homepage.URL"), { found: true, value: "x" });
});

Deno.test("stored content is read into json names; content the message rejects still reaches the JSON view", () => {
  assert.deepEqual(
    contentToValue(
      "Dconf",
      JSON.stringify({ entries: [{ schema_id: "org.gnome.x", key: "k", value: "1" }] }),
    ),
    {
      value: { entries: [{ schemaId: "org.gnome.x", key: "k", value: "1" }] },
    },
  );
  const odd = contentToValue("Firefox", JSON.stringify({ NoSuchPolicyKey: true }));
  assert.deepEqual(odd.value, { NoSuchPolicyKey: true });
  assert.match(odd.warning!, /does not match the Firefox message.*JSON view/);
  assert.deepEqual(contentToValue("FutureType", '{"a":1}'), { value: { a: 1 } });
});

Deno.test("form model: labels, allowed values from comments, immutable edits that prune empties", () => {
  assert.equal(humanize("DisableAppUpdate"), "Disable app update");
  assert.equal(humanize("DNSOverHTTPS"), "DNS over HTTPS");
  assert.equal(humanize("SSLVersionMin"), "SSL version min");
  assert.equal(humanize("schemaId"), "Schema id");
  assert.deepEqual(optionsFromDoc('"always", "never" or "newtab".').map((o) => o.value), [
    "always",
    "never",
    "newtab",
  ]);
  assert.deepEqual(optionsFromDoc("0 = off, 1 = moderate, 2 = strict.").map((o) => o.value), [0, 1, 2]);
  assert.deepEqual(optionsFromDoc('GSettings schema ID, e.g. "org.gnome.desktop.screensaver".'), []);
  const root = { Homepage: { URL: "x", Locked: true }, Keep: 1 };
  const cleared = setIn(root, ["Homepage", "URL"], undefined);
  assert.deepEqual(cleared, { Homepage: { Locked: true }, Keep: 1 });
  assert.deepEqual(root.Homepage, { URL: "x", Locked: true }, "the input is not mutated");
  assert.deepEqual(
    setIn(cleared, ["Homepage", "Locked"], undefined),
    { Keep: 1 },
    "an emptied object goes away",
  );
  assert.deepEqual(setIn({}, ["rules", 0], {}), { rules: [{}] }, "a new list item");
  assert.deepEqual(setIn({ rules: [{ a: 1 }, { b: 2 }] }, ["rules", 0], undefined), { rules: [{ b: 2 }] });
});

Deno.test("proto comments: group headings and field docs follow the .proto conventions", () => {
  const docs = parseProtoDocs(`syntax = "proto3";
package svc.policy.v1;

// Doc of the message.
//
// Second paragraph.
message M {
  // Updates
  optional bool a = 1 [json_name = "A"];
  // Pins the version.
  optional string b = 2;

  // Privacy
  // "on" or "off".
  repeated string c = 3;
  map<string, string> d = 4;
  oneof choice {
    string e = 5;
  }
  reserved 9;
}

message N {
  // At least one entry is required.
  repeated M entries = 1;
}
`);
  assert.equal(docs["svc.policy.v1.M"].doc, "Doc of the message.\n\nSecond paragraph.");
  assert.deepEqual(docs["svc.policy.v1.M"].fields, {
    a: { group: "Updates" },
    b: { doc: "Pins the version.", group: "Updates" },
    c: { doc: '"on" or "off".', group: "Privacy" },
    d: { group: "Privacy" },
    e: { group: "Privacy" },
  });
  assert.deepEqual(docs["svc.policy.v1.N"].fields, { entries: { doc: "At least one entry is required." } });
});

Deno.test("every registered policy type has its editor and documented content message", async () => {
  const docs = await readProtoDocs(new URL("../../proto/svc/policy/v1/", import.meta.url));
  for (const def of listPolicyTypes()) {
    const editor = editorFor(def.wireName);
    assert.equal(editor.type, def.wireName);
    assert.ok(docs[def.schema.typeName], `${def.schema.typeName} has comments in its .proto file`);
    for (const field of def.schema.fields) {
      assert.ok(
        field.name in docs[def.schema.typeName].fields,
        `${def.schema.typeName}.${field.name} is parsed`,
      );
    }
  }
  assert.ok(editorFor("Firefox").hints.enums?.["Cookies.Behavior"]?.includes("reject-tracker"));
  assert.deepEqual(editorFor("SomethingNew").hints, {});
});

Deno.test("enrollment commands use a root-only token file and name the server to point the agent at", () => {
  const text = enrollmentCommands("tok_EN-123", { host: "svc.example.org", port: "" });
  const lines = text.split("\n");
  assert.match(lines[0], /server\.address: svc\.example\.org and server\.enrollment_port: 443/);
  assert.deepEqual(lines.slice(1), [
    "install -m 0600 /dev/null /etc/svc/enrollment-token",
    "printf '%s' 'tok_EN-123' > /etc/svc/enrollment-token",
    "svc-agent --token-file /etc/svc/enrollment-token",
    "rm -f /etc/svc/enrollment-token",
    "systemctl enable --now svc-agent",
  ]);
  assert.doesNotMatch(enrollmentCommands("t", { host: "h", port: "8443" }).split("\n")[0], /enrollment_port/);
});
