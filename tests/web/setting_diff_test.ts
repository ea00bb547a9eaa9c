/**
 * Policy content as settings by name (web/src/setting_diff.ts): labels from the editors' catalogue, values
 * in one line with enum constants by their label, and changes setting by setting; lists of entries are
 * compared entry by entry by their identifying fields.
 */
import assert from "node:assert/strict";
import { settingDiff, settingLabel, settingsOf, valueText } from "../../web/src/setting_diff.ts";

Deno.test("browser settings are named by the catalogue, with on/off values", () => {
  assert.equal(settingLabel("Firefox", "DisableTelemetry"), "Turn off telemetry");
  assert.deepEqual(settingsOf("Firefox", { DisableTelemetry: true, Homepage: { URL: "https://x" } }), [
    { key: "DisableTelemetry", label: "Turn off telemetry", text: "on" },
    { key: "Homepage", label: "Home page", text: "URL: https://x" },
  ]);
});

Deno.test("a browser diff lists added, changed and removed settings by label, old → new", () => {
  const changes = settingDiff(
    "Firefox",
    { DisableTelemetry: true, DisablePocket: true },
    { DisableTelemetry: false, DisableFirefoxStudies: true },
  );
  assert.deepEqual(changes.map((c) => [c.kind, c.label, c.from, c.to]), [
    ["changed", "Turn off telemetry", "on", "off"],
    ["added", "Turn off studies", undefined, "on"],
    ["removed", "Turn off Pocket", "on", undefined],
  ]);
  assert.deepEqual(settingDiff("Firefox", { DisableTelemetry: true }, { DisableTelemetry: true }), []);
});

Deno.test("free-form browser keys are settings of their own", () => {
  const changes = settingDiff("Chrome", { additional: { FooPolicy: 1 } }, { additional: { FooPolicy: 2 } });
  assert.deepEqual(changes.map((c) => [c.key, c.label, c.from, c.to]), [[
    "additional.FooPolicy",
    "FooPolicy",
    "1",
    "2",
  ]]);
});

Deno.test("entry lists pair entries by identity: an edited dconf key is one change", () => {
  const key = { schemaId: "org.gnome.desktop.screensaver", key: "lock-delay" };
  const [change] = settingDiff(
    "Dconf",
    { entries: [{ ...key, value: "uint32 0" }, { schemaId: "a.b", key: "gone", value: "true" }] },
    { entries: [{ ...key, value: "uint32 300" }, { schemaId: "a.b", key: "new", value: "false" }] },
  );
  assert.equal(change.label, "Entries");
  assert.deepEqual(change.entries!.map((e) => [e.kind, e.entry]), [
    ["changed", "org.gnome.desktop.screensaver lock-delay"],
    ["removed", "a.b gone"],
    ["added", "a.b new"],
  ]);
  assert.match(change.entries![0].from!, /uint32 0/);
  assert.match(change.entries![0].to!, /uint32 300/);
});

Deno.test("enum constants read as the form's labels", () => {
  const [rules] = settingsOf("Polkit", {
    rules: [{ actionIds: ["org.freedesktop.udisks2.filesystem-mount"], result: "POLKIT_RESULT_AUTH_ADMIN" }],
  });
  assert.doesNotMatch(rules.text, /POLKIT_RESULT_/);
  assert.match(rules.text, /Result: Auth admin/);
  assert.equal(valueText(["a", "b"]), "a, b");
  assert.equal(valueText([]), "(empty list)");
});
