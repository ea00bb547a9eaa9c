/** Compliance item rows name a browser setting by its editor label and label the enum constants in messages. */
import assert from "node:assert/strict";
import { itemMessage, itemTitle } from "../../web/src/compliance_items.ts";
import { getPolicyType } from "../../shared/policy_types/mod.ts";
import { isBrowserType } from "../../shared/policy_types/browser.ts";

Deno.test("a browser setting's item row is titled by the editor's label, with the key as secondary text", () => {
  const firefox = getPolicyType("Firefox");
  assert.ok(isBrowserType(firefox));
  const label = firefox.fieldInfo.DisableTelemetry.label;
  assert.notEqual(label, "DisableTelemetry");
  assert.deepEqual(itemTitle("Firefox", "policies.json", "DisableTelemetry"), {
    title: label,
    key: "policies.json/DisableTelemetry",
  });
  // A nested key has its own label where the catalogue gives one, else its setting's.
  assert.equal(itemTitle("Firefox", "", "Homepage.URL").title, firefox.fieldInfo["Homepage.URL"].label);
  assert.equal(itemTitle("Firefox", "", "Homepage.NoSuchPart").title, firefox.fieldInfo.Homepage.label);
  const chrome = getPolicyType("Chrome");
  assert.ok(isBrowserType(chrome));
  assert.equal(itemTitle("Chrome", "", "HomepageLocation").title, chrome.fieldInfo.HomepageLocation.label);
});

Deno.test("items that are no catalogue setting keep their key as the title", () => {
  assert.deepEqual(itemTitle("Dconf", "org.gnome.desktop.screensaver", "lock-enabled"), {
    title: "org.gnome.desktop.screensaver/lock-enabled",
    key: "",
  });
  assert.deepEqual(itemTitle("Firefox", "", "NotARealPolicy"), { title: "NotARealPolicy", key: "" });
  assert.deepEqual(itemTitle("NoSuchType", "", "x"), { title: "x", key: "" });
});

Deno.test("enum constants in an item's message read as the editor's labels", () => {
  assert.equal(
    itemMessage("Firewalld", "zone target is FIREWALLD_TARGET_DROP, expected FIREWALLD_TARGET_ACCEPT"),
    "zone target is Drop, expected Accept",
  );
  assert.equal(itemMessage("Firefox", "in effect"), "in effect");
  assert.equal(itemMessage("Firewalld", ""), "");
});
