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
import {
  fieldMeta,
  formModel,
  humanize,
  matchesFilter,
  mergeHint,
  type MetaSource,
  optionsFromDoc,
  type ProtoDocs,
  rangeText,
  setIn,
  visibleFields,
} from "../../web/src/editors/form_model.ts";
import { editorFor } from "../../web/src/editors/mod.ts";
import { EDITORS } from "../../web/src/editors/registry.gen.ts";
import { enrollmentCommands } from "../../web/src/enrollment.ts";
import { parseProtoDocs, readProtoDocs } from "../../web/proto_docs.ts";
import { getPolicyType, listPolicyTypes } from "../../shared/policy_types/mod.ts";
import { isBrowserType } from "../../shared/policy_types/browser.ts";
import { chromeType } from "../../shared/policy_types/chrome.ts";
import { firefoxType } from "../../shared/policy_types/firefox.ts";
import { thunderbirdType } from "../../shared/policy_types/thunderbird.ts";
import docsJson from "../../web/src/editors/proto_docs.gen.json" with { type: "json" };
import {
  enumChoices,
  enumsOf,
  enumValueLabel,
  labelEnumConstants,
  labelIssues,
} from "../../web/src/editors/enum_labels.ts";
import { policyTypeInfo, typesMatching } from "../../web/src/editors/type_info.ts";
import { parseLockout, plainLockoutMessage } from "../../web/src/lockout_text.ts";
import { forbiddenText, rolesGranting } from "../../web/src/permission_text.ts";
import { validatePolicyContent } from "../../shared/policy_types/mod.ts";
import { FirewalldTargetSchema } from "../../shared/gen/svc/policy/v1/firewalld_pb.ts";
import { PolkitResultSchema } from "../../shared/gen/svc/policy/v1/polkit_pb.ts";

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
    assert.ok(EDITORS.has(def.wireName), `web/src/editors has the ${def.wireName} editor`);
    assert.ok(docs[def.schema.typeName], `${def.schema.typeName} has comments in its .proto file`);
    for (const field of def.schema.fields) {
      assert.ok(
        field.name in docs[def.schema.typeName].fields,
        `${def.schema.typeName}.${field.name} is parsed`,
      );
    }
  }
  for (const def of listPolicyTypes()) {
    const { catalogue, escapeHatch } = editorFor(def.wireName).hints;
    if (isBrowserType(def)) {
      assert.equal(catalogue?.fieldInfo, def.fieldInfo, `${def.wireName} follows the shared catalogue`);
      assert.equal(catalogue?.groups, def.groups);
      assert.equal(escapeHatch, "additional");
    } else if (catalogue) {
      // A non-browser editor may label its fields; every label must name a real field of the content message.
      const fields = new Set(def.schema.fields.flatMap((f) => [f.jsonName, f.name]));
      for (const [path, info] of Object.entries(catalogue.fieldInfo)) {
        const top = path.split(/[.[]/)[0];
        assert.ok(fields.has(top), `${def.wireName} labels ${path}, which is not a field of its content`);
        if (info.group) assert.ok(catalogue.groups.includes(info.group), `${def.wireName}: group of ${path}`);
      }
    }
  }
  assert.deepEqual(editorFor("SomethingNew").hints, {});
});

const DOCS = docsJson as ProtoDocs;

function browserSource(wireName: string): MetaSource {
  const def = getPolicyType(wireName);
  assert.ok(isBrowserType(def));
  return {
    catalogue: { groups: def.groups, fieldInfo: def.fieldInfo },
    docs: DOCS,
    escapeHatch: "additional",
  };
}

/** The top-level fields of a model as `group: key` lines. */
function listing(model: ReturnType<typeof formModel>): string[] {
  return model.groups.flatMap((g) => g.fields.map((f) => `${g.name}: ${f.meta.key}`));
}

Deno.test("form model: a browser type's catalogue gives the groups in order, labels, enum labels and ranges", () => {
  const source = browserSource("Chrome");
  const model = formModel(source, { schema: chromeType.schema, value: {} });
  assert.deepEqual(model.groups.map((g) => g.name), [...chromeType.groups, "Other policy keys"]);
  assert.equal(model.total, chromeType.schema.fields.length, "Chrome has no unsupported field to hide");
  const first = model.groups[0].fields[0].meta;
  assert.deepEqual([first.key, first.label, first.description], [
    "HomepageLocation",
    "Home page URL",
    "The page the home button opens.",
  ]);
  const meta = (key: string) => model.groups.flatMap((g) => g.fields).find((f) => f.meta.key === key)!.meta;
  assert.deepEqual(meta("RestoreOnStartup").options, [
    { value: 1, label: "Continue where you left off" },
    { value: 4, label: "Open the pages in RestoreOnStartupURLs" },
    { value: 5, label: "Open the new tab page" },
  ]);
  assert.equal(meta("RestoreOnStartup").label, "At start-up");
  const period = meta("RelaunchNotificationPeriod");
  assert.deepEqual([period.min, period.max, period.unit], [3_600_000, 2_147_483_647, "milliseconds"]);
  assert.equal(rangeText(period), "From 3,600,000 to 2,147,483,647 milliseconds.");
  assert.equal(rangeText({ min: 1 }), "At least 1.");
  assert.equal(rangeText({}), undefined);
  assert.match(meta("SSLVersionMin").deprecated!, /Removed from current Chrome/);
  assert.equal(meta("SSLVersionMin").chromeOnly, false);
  assert.equal(meta("additional").group, "Other policy keys");
  assert.equal(meta("additional").label, "Additional", "the escape hatch keeps its .proto description");
  assert.ok(meta("additional").description);
});

Deno.test("form model: list fields say how they combine across policies; scalars say nothing", () => {
  const source = browserSource("Chrome");
  const field = (key: string) => chromeType.schema.fields.find((f) => f.jsonName === key)!;
  const hint = (key: string) =>
    fieldMeta(source, { message: chromeType.schema, field: field(key), rule: key }).mergeHint;
  assert.equal(hint("URLBlocklist"), "Lists from several policies are combined (duplicates dropped).");
  assert.match(hint("ExtensionSettings")!, /Entries from several policies are combined; for the same entry/);
  assert.match(hint("RestoreOnStartupURLs")!, /^Not combined across policies/, "a list without a merge rule");
  assert.equal(hint("HomepageLocation"), undefined);
  assert.match(mergeHint("per-member-union", false)!, /Lists inside are combined/);
  // Merge rules are top-level only: a nested list does not claim to combine.
  const firefox = browserSource("Firefox");
  const homepage = firefoxType.schema.fields.find((f) => f.jsonName === "Homepage")!;
  assert.ok(homepage.fieldKind === "message");
  const additional = homepage.message.fields.find((f) => f.jsonName === "Additional")!;
  assert.equal(
    fieldMeta(firefox, { message: homepage.message, field: additional, rule: "Homepage.Additional" })
      .mergeHint,
    undefined,
  );
  assert.equal(
    fieldMeta(firefox, { message: homepage.message, field: additional, rule: "Homepage.Additional" }).label,
    "More pages",
  );
});

Deno.test("form model: search by label, key and description (every word), nested labels included", () => {
  const chrome = browserSource("Chrome");
  const find = (filter: string) =>
    listing(formModel(chrome, { schema: chromeType.schema, value: {}, filter }));
  assert.deepEqual(find("relaunch period"), ["Browser behaviour: RelaunchNotificationPeriod"]);
  assert.deepEqual(
    find("PERIOD relaunch"),
    ["Browser behaviour: RelaunchNotificationPeriod"],
    "any order and case",
  );
  assert.deepEqual(find("URLBlocklist"), ["Content filtering: URLBlocklist"], "by key");
  assert.deepEqual(
    find("GPU acceleration"),
    ["Browser behaviour: HardwareAccelerationModeEnabled"],
    "by description",
  );
  assert.deepEqual(find("no such setting at all"), []);
  const firefox = browserSource("Firefox");
  assert.deepEqual(
    listing(
      formModel(firefox, { schema: firefoxType.schema, value: {}, filter: "behaviour in private windows" }),
    ),
    ["Privacy and telemetry: Cookies"],
    "a nested setting's label finds its section",
  );
  const meta = fieldMeta(chrome, {
    message: chromeType.schema,
    field: chromeType.schema.fields[0],
    rule: "HomepageLocation",
  });
  assert.ok(
    matchesFilter(meta, "") && matchesFilter(meta, "homepage_location"),
    "the proto name is a key too",
  );
});

Deno.test("form model: only configured settings, counted per group", () => {
  const model = formModel(browserSource("Chrome"), {
    schema: chromeType.schema,
    value: { RestoreOnStartup: 5, URLBlocklist: ["example.com"], PrintingEnabled: false, URLAllowlist: [] },
    onlyConfigured: true,
  });
  assert.deepEqual(listing(model), [
    "Start-up and home page: RestoreOnStartup",
    "Content filtering: URLBlocklist",
    "Downloads and printing: PrintingEnabled",
  ], "an explicit false is a setting, an empty list is not");
  assert.equal(model.configured, 3);
  assert.deepEqual(model.groups.map((g) => [g.configured, g.total]), [[1, 6], [1, 4], [1, 4]]);
});

Deno.test("form model: unsupported fields are hidden unless the content sets them, then shown with the reason", () => {
  const source = browserSource("Thunderbird");
  const field = thunderbirdType.schema.fields.find((f) => f.jsonName === "InAppNotification")!;
  assert.ok(field.fieldKind === "message");
  const keys = (value: Record<string, boolean>) =>
    visibleFields(source, { message: field.message, rule: "InAppNotification", value }).map((f) =>
      f.meta.key
    );
  assert.deepEqual(keys({}), ["DonationEnabled", "SurveyEnabled", "MessageEnabled", "Disabled"]);
  const stored = visibleFields(source, {
    message: field.message,
    rule: "InAppNotification",
    value: { Enabled: false },
  });
  const enabled = stored.find((f) => f.meta.key === "Enabled")!;
  assert.equal(enabled.configured, true, "an explicit false is shown too");
  assert.equal(
    enabled.meta.unsupported,
    "Thunderbird has no InAppNotification.Enabled; set InAppNotification.Disabled instead",
  );
  assert.ok(!stored.some((f) => f.meta.key === "Locked"));
  // The label of a hidden field does not make its section match a search.
  assert.deepEqual(
    listing(formModel(source, { schema: thunderbirdType.schema, value: {}, filter: "cookie behaviour" })),
    [],
  );
  const deprecated = formModel(source, { schema: thunderbirdType.schema, value: {} }).groups
    .flatMap((g) => g.fields).find((f) => f.meta.key === "LocalFileLinks")!;
  assert.match(deprecated.meta.deprecated!, /Thunderbird 153 no longer lists this policy/);
});

Deno.test("form model: Chrome-only settings are marked; settings outside the catalogue fall back to .proto comments", () => {
  const source: MetaSource = {
    catalogue: {
      groups: ["Home"],
      fieldInfo: {
        HomepageLocation: { group: "Home", label: "Home", description: "Home page.", chromeOnly: true },
      },
    },
    docs: DOCS,
  };
  const model = formModel(source, { schema: chromeType.schema, value: {} });
  assert.equal(model.groups[0].name, "Home");
  assert.equal(model.groups[0].fields[0].meta.chromeOnly, true);
  const fallback = model.groups.flatMap((g) => g.fields).find((f) => f.meta.key === "RestoreOnStartup")!.meta;
  assert.equal(fallback.label, "Restore on startup");
  assert.equal(
    fallback.group,
    DOCS["svc.policy.v1.ChromePolicy"].fields.restore_on_startup.group ?? "Settings",
  );
  assert.equal(fallback.chromeOnly, false);
});

Deno.test("form model: the other types keep .proto groups, humanized labels and allowed values from comments", () => {
  const source: MetaSource = { docs: DOCS };
  for (const def of listPolicyTypes().filter((d) => !isBrowserType(d))) {
    const model = formModel(source, { schema: def.schema, value: {} });
    assert.equal(model.total, def.schema.fields.length, def.wireName);
    for (const group of model.groups) {
      for (const f of group.fields) {
        assert.equal(f.meta.label, humanize(f.field.jsonName));
        assert.equal(f.meta.description, DOCS[def.schema.typeName].fields[f.field.name]?.doc);
        assert.equal(f.meta.group, DOCS[def.schema.typeName].fields[f.field.name]?.group ?? "Settings");
      }
    }
  }
  const docs: ProtoDocs = {
    "svc.policy.v1.ChromePolicy": {
      fields: {
        restore_on_startup: { doc: "0 = off, 1 = on.", group: "Later" },
        homepage_location: { group: "First" },
      },
    },
  };
  const model = formModel({ docs }, { schema: chromeType.schema, value: {} });
  assert.deepEqual(
    model.groups.map((g) => g.name),
    ["First", "Settings", "Later"],
    "groups in order of appearance",
  );
  assert.deepEqual(model.groups[2].fields[0].meta.options?.map((o) => o.value), [0, 1]);
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

Deno.test("errors name enum values by the form's label, never by the proto constant", () => {
  assert.equal(enumValueLabel(FirewalldTargetSchema, "FIREWALLD_TARGET_DROP"), "Drop");
  assert.equal(enumValueLabel(PolkitResultSchema, "POLKIT_RESULT_AUTH_ADMIN"), "Auth admin");
  const firewalld = getPolicyType("Firewalld")!.schema;
  assert.equal(
    labelEnumConstants(firewalld, "target FIREWALLD_TARGET_DROP conflicts"),
    "target Drop conflicts",
  );
  // Words that are no value of the type's enums stay as they are.
  assert.equal(
    labelEnumConstants(firewalld, "POLKIT_RESULT_YES and SOME_OTHER_WORD"),
    "POLKIT_RESULT_YES and SOME_OTHER_WORD",
  );
  // The shared validator's hints, as the editor shows them (the same rule the server applies).
  const polkit = labelIssues(
    "Polkit",
    validatePolicyContent("Polkit", JSON.stringify({ rules: [{ actionIds: ["org.example.run"] }] })),
  );
  assert.ok(
    polkit.some((i) =>
      i.field === "rules[0].result" && i.message.includes("Auth admin") && !/POLKIT_RESULT/.test(i.message)
    ),
    JSON.stringify(polkit),
  );
  const flatpak = labelIssues(
    "Flatpak",
    validatePolicyContent("Flatpak", JSON.stringify({ apps: [{ appId: "org.example.App" }] })),
  );
  const state = flatpak.find((i) => i.field.endsWith(".state"));
  assert.equal(
    state?.message,
    "choose a state: Present, Latest or Absent",
    JSON.stringify(flatpak),
  );
  // Every enum constant a type's editor can produce has a label that is not the constant itself, and no
  // choice offers proto3's "not set" zero value.
  for (const t of listPolicyTypes()) {
    for (const e of enumsOf(t.schema)) {
      for (const v of e.values) assert.notEqual(enumValueLabel(e, v.name), v.name, `${t.wireName} ${v.name}`);
      const choices = enumChoices(e);
      assert.ok(choices.length > 0, `${t.wireName} ${e.name}`);
      assert.ok(!choices.some((c) => /unspecified/i.test(c.label)), `${t.wireName} ${e.name}`);
    }
  }
});

Deno.test("new policy tiles and the policy picker: every type has a label and one line; search matches types", () => {
  for (const t of listPolicyTypes()) {
    const info = policyTypeInfo(t.wireName);
    assert.ok(info.label && info.description, `${t.wireName} is described`);
    assert.ok(!info.description.includes("\n") && info.description.length <= 80, `${t.wireName}: one line`);
  }
  assert.equal(policyTypeInfo("FutureType").label, "FutureType");
  assert.deepEqual(typesMatching("firewall"), ["Firewalld"]);
  assert.deepEqual(typesMatching("gnome"), ["Dconf"]);
  assert.deepEqual(typesMatching("  "), []);
});

Deno.test("the lockout guard's refusal reads as words: groups as groups, no API field names", () => {
  const message =
    'releasing this policy would lock node group "lab" out: none of the accounts the SessionAccess ' +
    "rules name (alice, %support) may log in Mon 00:00–Mon 09:00, Mon 17:00–Tue 09:00 and 2 more (UTC); " +
    "check the rules, or confirm with a lockout_reason to go ahead";
  assert.deepEqual(parseLockout(message), {
    where: 'Releasing this policy would lock node group "lab" out',
    accounts: ["alice", "the group support"],
    times: ["Mon 00:00–Mon 09:00", "Mon 17:00–Tue 09:00"],
    more: 2,
    zone: "UTC",
  });
  // Worded otherwise by a later server: still no field name and no "%group".
  const other = plainLockoutMessage(
    "this policy would lock %staff out; check the rules, or confirm with a lockout_reason to go ahead",
  );
  assert.equal(other, "This policy would lock the group staff out.");
  assert.equal(parseLockout("something else"), undefined);
});

Deno.test("a 403 names what the permission allows and the built-in roles that grant it", () => {
  const text = forbiddenText("permission policy:edit is required for this action");
  assert.doesNotMatch(text, /policy:edit/);
  assert.match(text, /“edit policies”/);
  assert.match(text, /Policy Editor, Org Admin or Super Admin/);
  assert.deepEqual(rolesGranting(["policy:release"]), ["Policy Reviewer", "Org Admin", "Super Admin"]);
  assert.deepEqual(rolesGranting(["role:edit"]), ["Super Admin"]);
  // The role-management refusal lists several permissions.
  const several = forbiddenText(
    'you cannot grant role "Auditor": it involves permissions audit_log:export, role:view that you do not hold',
  );
  assert.match(several, /“export the audit log”, “view roles”/);
  assert.doesNotMatch(several, /[a-z_]+:[a-z_]+/);
  // A 403 without a permission in it is passed on.
  assert.equal(forbiddenText("step-up required"), "Not allowed: Step-up required");
});
