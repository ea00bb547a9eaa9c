/**
 * The browser policy types (Firefox, Thunderbird, Chrome, Edge) in the shared registry: the catalogue the
 * editor is generated from covers every field of the content messages and nothing else; validation checks
 * enumerations, ranges, URL schemes, TLS versions and list item formats with messages naming the field and
 * the fix, accepts the documented value forms, refuses hostile content; the catalogue agrees with the policy
 * schemas the installed Firefox and Thunderbird ship (skipped, saying why, where they are not installed).
 */
import assert from "node:assert/strict";
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import {
  getPolicyType,
  MAX_CONTENT_BYTES,
  MAX_JSON_DEPTH,
  validatePolicyContent,
  type ValidationIssue,
} from "../../shared/policy_types/mod.ts";
import { type BrowserTypeDef, isBrowserType } from "../../shared/policy_types/browser.ts";
import { readZipEntry } from "../../agent/enforcers/known_policies.ts";

const BROWSERS = ["Firefox", "Thunderbird", "Chrome", "Edge"] as const;

function def(wireName: string): BrowserTypeDef {
  const d = getPolicyType(wireName);
  assert.ok(isBrowserType(d), `${wireName} is a browser type`);
  return d;
}

function describe(issues: ValidationIssue[]): string {
  return issues.map((i) => `${i.field}: ${i.message}`).join("\n");
}

function check(type: string, content: unknown): string {
  return describe(validatePolicyContent(type, JSON.stringify(content)));
}

/** Every catalogue path of a message: `Key`, `Key.Sub`, `List[].Sub`, `Map.*.Sub`. */
function messagePaths(message: DescMessage, prefix = ""): Map<string, DescField> {
  const out = new Map<string, DescField>();
  for (const field of message.fields) {
    if (field.jsonName === "additional") continue;
    const path = prefix + field.jsonName;
    out.set(path, field);
    const wkt = field.message?.typeName.startsWith("google.protobuf.");
    if (field.fieldKind === "message" && !wkt) {
      for (const [k, v] of messagePaths(field.message, `${path}.`)) out.set(k, v);
    } else if (field.fieldKind === "list" && field.listKind === "message") {
      for (const [k, v] of messagePaths(field.message, `${path}[].`)) out.set(k, v);
    } else if (field.fieldKind === "map" && field.mapKind === "message") {
      for (const [k, v] of messagePaths(field.message, `${path}.*.`)) out.set(k, v);
    }
  }
  return out;
}

Deno.test("catalogue: every field of every browser message has group (top level), label, description; nothing else", () => {
  for (const type of BROWSERS) {
    const d = def(type);
    const paths = messagePaths(d.schema);
    assert.deepEqual(
      [...paths.keys()].filter((p) => !d.fieldInfo[p]),
      [],
      `${type}: fields without catalogue entry`,
    );
    assert.deepEqual(
      Object.keys(d.fieldInfo).filter((p) => !paths.has(p)),
      [],
      `${type}: catalogue entries without field`,
    );
    const used = new Set<string>();
    for (const [path, info] of Object.entries(d.fieldInfo)) {
      assert.ok(info.label.trim() && info.description.trim(), `${type} ${path}: label and description`);
      assert.doesNotMatch(info.label + info.description, /\{app\}/, `${type} ${path}: placeholder left`);
      const topLevel = !path.includes(".") && !path.includes("[]");
      if (topLevel) {
        assert.ok(info.group && d.groups.includes(info.group), `${type} ${path}: group "${info.group}"`);
        used.add(info.group!);
      } else {
        assert.equal(info.group, undefined, `${type} ${path}: nested settings take their parent's group`);
        assert.equal(info.merge, undefined, `${type} ${path}: merge rules are for top-level keys`);
      }
      const field = paths.get(path)!;
      const scalar = field.fieldKind === "scalar" || field.fieldKind === "list" ? field.scalar : undefined;
      const numeric = scalar !== undefined && scalar !== 9 && scalar !== 8; // 9 = string, 8 = bool
      for (const option of info.enum ?? []) {
        assert.equal(
          typeof option.value,
          numeric ? "number" : "string",
          `${type} ${path}: enum value ${option.value} matches the field type`,
        );
        assert.ok(option.label, `${type} ${path}: enum label`);
      }
      if (info.min !== undefined || info.max !== undefined) {
        assert.ok(numeric, `${type} ${path}: range on a number`);
      }
      if (info.format || info.keyFormat) assert.ok(!numeric, `${type} ${path}: format on text`);
    }
    assert.deepEqual(d.groups.filter((g) => !used.has(g)), [], `${type}: empty groups`);
  }
});

Deno.test("catalogue: additive keys are the documented extension and URL lists", () => {
  const union = (type: string) =>
    Object.entries(def(type).fieldInfo).filter(([, i]) => i.merge && i.merge !== "replace").map(([k, i]) =>
      `${k}:${i.merge}`
    ).sort();
  assert.deepEqual(union("Firefox"), [
    "Bookmarks:union",
    "Certificates:per-member-union",
    "ExtensionSettings:per-entry",
    "Extensions:per-member-union",
    "Permissions:per-entry",
    "Preferences:per-entry",
    "WebsiteFilter:per-member-union",
  ]);
  assert.deepEqual(union("Thunderbird"), [
    "Certificates:per-member-union",
    "ExtensionSettings:per-entry",
    "Extensions:per-member-union",
    "Preferences:per-entry",
  ]);
  const chrome = union("Chrome");
  for (
    const key of [
      "ExtensionInstallForcelist:union",
      "ExtensionInstallBlocklist:union",
      "ExtensionSettings:per-entry",
      "URLBlocklist:union",
      "URLAllowlist:union",
      "CookiesBlockedForUrls:union",
    ]
  ) assert.ok(chrome.includes(key), key);
  assert.equal(def("Chrome").mergeRule("HomepageLocation"), "replace");
  assert.equal(def("Chrome").mergeRule("SomethingNotCurated"), "replace");
  assert.equal(def("Edge").mergeRule("URLBlocklist"), "union");
  // The editor's hints keep their shape.
  assert.deepEqual(def("Firefox").rules.enums["Proxy.SOCKSVersion"], [4, 5]);
  assert.deepEqual(def("Chrome").rules.urls.ProxyPacUrl, ["http", "https", "file"]);
});

Deno.test("valid: realistic content in every documented value form passes", () => {
  const valid: Record<string, unknown[]> = {
    Firefox: [
      {
        AppUpdatePin: "128.",
        SSLVersionMin: "tls1.2",
        SSLVersionMax: "tls1.3",
        HttpsOnlyMode: "force_enabled",
        OverrideFirstRunPage: "",
        DefaultDownloadDirectory: "${home}/Downloads",
        WebsiteFilter: { Block: ["<all_urls>"], Exceptions: ["https://*.example.com/*", "file:///srv/*"] },
        Cookies: { Allow: ["https://intranet.example", "http://10.0.0.1:8080/"], Behavior: "reject-tracker" },
        Permissions: { Autoplay: { Default: "block-audio" }, Camera: { Block: ["https://x.example"] } },
        Extensions: {
          Install: ["https://addons.example/a.xpi", "file:///opt/a.xpi"],
          Uninstall: ["a@b.example"],
        },
        ExtensionSettings: {
          "*": { installation_mode: "blocked", install_sources: ["https://addons.mozilla.org/*"] },
          "uBlock0@raymondhill.net": {
            installation_mode: "force_installed",
            install_url: "https://x.example/u.xpi",
          },
          "{ec8030f7-c20a-464f-9b0e-13a3a9e97384}": { installation_mode: "allowed" },
        },
        Preferences: { "browser.startup.page": { Value: 3, Status: "locked" } },
        Proxy: { Mode: "manual", HTTPProxy: "proxy.example:3128", SOCKSProxy: "[::1]:1080", SOCKSVersion: 5 },
        DNSOverHTTPS: {
          Enabled: true,
          ProviderURL: "https://doh.example/dns-query",
          ExcludedDomains: ["corp.example"],
        },
        SearchEngines: { Add: [{ Name: "Intra", URLTemplate: "https://search.example/?q={searchTerms}" }] },
        Bookmarks: [{ Title: "Wiki", URL: "https://wiki.example", Favicon: "data:image/png;base64,AA==" }],
        RequestedLocales: ["de", "en-US"],
        additional: { SomeFuturePolicy: { Enabled: true } },
      },
    ],
    Thunderbird: [{
      Cookies: { Default: false, AcceptThirdParty: "from-visited", Allow: ["https://mail.example"] },
      InAppNotification: { Disabled: true },
      InstallAddonsPermission: { Allow: ["https://addons.thunderbird.net"], Default: false },
      LocalFileLinks: ["https://intranet.example"],
      Preferences: { "mail.server.default.check_new_mail": { Value: true, Status: "default" } },
    }],
    Chrome: [{
      ExtensionInstallForcelist: [
        "cjpalhdlnbpafiamejdnhcphjbkeiagm",
        "cjpalhdlnbpafiamejdnhcphjbkeiagm;https://clients2.google.com/service/update2/crx",
      ],
      ExtensionInstallBlocklist: ["*"],
      ExtensionSettings: {
        "*": { installation_mode: "blocked", allowed_types: ["extension", "theme"] },
        "cjpalhdlnbpafiamejdnhcphjbkeiagm": {
          installation_mode: "force_installed",
          update_url: "https://u.example/x",
        },
        "https://extensions.example/updates.xml": { installation_mode: "allowed" },
      },
      URLBlocklist: [
        "*",
        "example.com",
        ".exact.example",
        "https://www.example.com:8443/path",
        "javascript://*",
      ],
      URLAllowlist: [".intranet.example", "chrome://policy", "http://[::1]/", "file://*", "custom-scheme:*"],
      CookiesAllowedForUrls: ["[*.]example.com", "https://[*.]example.org:443", "http://127.0.0.1"],
      RelaunchNotificationPeriod: 3_600_000,
      AuthSchemes: "negotiate,ntlm",
      AuthServerAllowlist: "*.example.com,intranet",
      RestrictSigninToPattern: ".*@example\\.com",
      AutoSelectCertificateForUrls: ['{"pattern":"https://[*.]example.com","filter":{}}'],
      DnsOverHttpsTemplates: "https://dns.example/dns-query{?dns} https://dns2.example/q",
      DownloadDirectory: "${user_home}/Downloads",
      SpellcheckLanguage: ["de", "en-US"],
      RestoreOnStartup: 4,
      RestoreOnStartupURLs: ["https://start.example"],
      ProxyMode: "fixed_servers",
      ProxyServer: "proxy.example:3128",
    }],
    Edge: [{
      TrackingPrevention: 3,
      SleepingTabsTimeout: 7200,
      ExtensionSettings: { "*": { toolbar_state: "default_hidden" } },
      PopupsBlockedForUrls: ["[*.]ads.example"],
      NewTabPageManagedQuickLinks: [{ url: "https://intranet.example", title: "Intranet", pinned: true }],
    }],
  };
  for (const [type, contents] of Object.entries(valid)) {
    for (const content of contents) {
      assert.equal(check(type, content), "", `${type} must accept ${JSON.stringify(content)}`);
    }
  }
});

Deno.test("enumerations name the allowed values (with their meaning for numbers)", () => {
  assert.match(
    check("Chrome", { RestoreOnStartup: 2 }),
    /RestoreOnStartup: must be one of 1, 4, 5 \(1 = Continue where you left off, 4 = Open the pages/,
  );
  assert.match(check("Edge", { SleepingTabsTimeout: 60 }), /SleepingTabsTimeout: must be one of 30, 300,/);
  assert.match(
    check("Firefox", { Cookies: { Behavior: "maybe" } }),
    /Cookies.Behavior: must be one of "accept", "reject-foreign"/,
  );
  assert.match(
    check("Chrome", { ExtensionAllowedTypes: ["extension", "plugin"] }),
    /ExtensionAllowedTypes\[1\]: must be one of "extension", "theme"/,
  );
  assert.match(
    check("Chrome", { AuthSchemes: "negotiate,kerberos" }),
    /AuthSchemes: "kerberos" is not one of "basic", "digest", "ntlm", "negotiate"; separate several with commas/,
  );
  assert.match(
    check("Firefox", { ExtensionSettings: { "a@b.example": { installation_mode: "force" } } }),
    /ExtensionSettings\["a@b.example"\].installation_mode: must be one of "allowed", "blocked"/,
  );
});

Deno.test("TLS versions: known names only, and the minimum not above the maximum", () => {
  assert.match(
    check("Thunderbird", { SSLVersionMin: "ssl3" }),
    /SSLVersionMin: must be one of "tls1", "tls1.1"/,
  );
  assert.match(
    check("Firefox", { SSLVersionMin: "tls1.3", SSLVersionMax: "tls1.2" }),
    /SSLVersionMin: tls1.3 is above SSLVersionMax tls1.2; lower SSLVersionMin or raise SSLVersionMax/,
  );
  assert.equal(check("Firefox", { SSLVersionMin: "tls1.2", SSLVersionMax: "tls1.2" }), "");
  assert.match(check("Chrome", { SSLVersionMin: "tls1" }), /SSLVersionMin: must be one of "tls1.2"/);
});

Deno.test("numeric ranges name the limit and unit", () => {
  assert.match(
    check("Chrome", { RelaunchNotificationPeriod: 1000 }),
    /RelaunchNotificationPeriod: must be at least 3600000 milliseconds/,
  );
});

Deno.test("URL schemes, URL patterns and match patterns", () => {
  const ff = check("Firefox", {
    Homepage: { URL: "javascript:alert(1)", Additional: ["ftp://x.example"] },
    DNSOverHTTPS: { ProviderURL: "http://doh.example" },
    WebsiteFilter: { Block: ["example.com", "*://*.example.com"] },
    Cookies: { Allow: ["https://a.example/path"] },
    SearchEngines: { Add: [{ Name: "x", URLTemplate: "https://s.example/?q=" }] },
  });
  assert.match(ff, /Homepage.URL: URL scheme must be http or https, not "javascript"/);
  assert.match(ff, /Homepage.Additional\[0\]: URL scheme must be http or https, not "ftp"/);
  assert.match(ff, /DNSOverHTTPS.ProviderURL: URL scheme must be https, not "http"/);
  assert.match(ff, /WebsiteFilter.Block\[0\]: must be a match pattern scheme:\/\/host\/path/);
  assert.match(ff, /WebsiteFilter.Block\[1\]: must be a match pattern/);
  assert.match(
    ff,
    /Cookies.Allow\[0\]: must be an origin only \(scheme:\/\/host\[:port\]\), e.g. https:\/\/a.example/,
  );
  assert.match(ff, /URLTemplate: must contain \{searchTerms\} where the search text goes/);
  const chrome = check("Chrome", {
    URLBlocklist: ["exa mple.com", 'x"y', "1bad://x", "*.example.com", "[*.]example.com", "example.com:*"],
    HomepageLocation: "file:///etc/passwd",
  });
  // The three forms Debian's Chromium reports as "Policy parsing error" in URLBlocklist.
  assert.match(
    chrome,
    /URLBlocklist\[3\]: may use \* only for a whole host: write example.com \(subdomains are included\)/,
  );
  assert.match(chrome, /URLBlocklist\[4\]: must be a URL filter such as example.com/);
  assert.match(chrome, /URLBlocklist\[5\]: port must be a number between 1 and 65535 \(no \*\)/);
  assert.match(chrome, /URLBlocklist\[0\]: must not contain spaces; write a URL filter such as example.com/);
  assert.match(chrome, /URLBlocklist\[1\]: must not contain quotes/);
  assert.match(chrome, /URLBlocklist\[2\]: has an invalid scheme "1bad"/);
  assert.match(chrome, /HomepageLocation: URL scheme must be http or https, not "file"/);
});

Deno.test("list item formats: extension ids, add-on ids, domains, locales, proxies, directories", () => {
  const chrome = check("Chrome", {
    ExtensionInstallForcelist: [
      "not-an-id",
      "cjpalhdlnbpafiamejdnhcphjbkeiagm;ftp://u.example",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaz",
    ],
    ExtensionInstallAllowlist: ["*"],
    ExtensionSettings: { "bad key": { installation_mode: "allowed" } },
    SafeBrowsingAllowlistDomains: ["exa_mple..com/x"],
    SpellcheckLanguage: ["english"],
    DownloadDirectory: "Downloads",
    RestrictSigninToPattern: "(unclosed",
    AutoSelectCertificateForUrls: ["pattern=x"],
  });
  assert.match(
    chrome,
    /ExtensionInstallForcelist\[0\]: must be an extension id: 32 lowercase letters a to p/,
  );
  assert.match(
    chrome,
    /ExtensionInstallForcelist\[1\]: update URL after ";" URL scheme must be http or https/,
  );
  assert.match(chrome, /ExtensionInstallForcelist\[2\]: must be an extension id/);
  assert.match(chrome, /ExtensionInstallAllowlist\[0\]: must be an extension id/);
  assert.match(
    chrome,
    /ExtensionSettings\["bad key"\]: key "bad key" must be an extension id \(32 letters a to p\), "\*"/,
  );
  assert.match(chrome, /SafeBrowsingAllowlistDomains\[0\]: must be a domain name such as example.com/);
  assert.match(chrome, /SpellcheckLanguage\[0\]: must be a language tag such as en-US or de/);
  assert.match(chrome, /DownloadDirectory: must be an absolute path such as \/srv\/downloads/);
  assert.match(chrome, /RestrictSigninToPattern: must be a valid regular expression/);
  assert.match(chrome, /AutoSelectCertificateForUrls\[0\]: must be a JSON object as text/);
  const ff = check("Firefox", {
    Extensions: { Uninstall: ["uBlock"], Locked: ["{not-a-guid}"] },
    ExtensionSettings: { "no-at-sign": { installation_mode: "allowed" } },
    Preferences: { "bad pref": { Value: 1 } },
    Proxy: { HTTPProxy: "proxy.example:99999", SSLProxy: "http://proxy.example:3128" },
    AppUpdatePin: "128",
    DefaultDownloadDirectory: "/srv/../etc",
  });
  assert.match(ff, /Extensions.Uninstall\[0\]: must be an add-on id such as uBlock0@raymondhill.net/);
  assert.match(ff, /Extensions.Locked\[0\]: must be an add-on id/);
  assert.match(
    ff,
    /ExtensionSettings\["no-at-sign"\]: key "no-at-sign" must be an add-on id .*or "\*" for every add-on/,
  );
  assert.match(
    ff,
    /Preferences\["bad pref"\]: key "bad pref" must be a preference name such as browser.startup.page/,
  );
  assert.match(ff, /Proxy.HTTPProxy: port must be between 1 and 65535/);
  assert.match(ff, /Proxy.SSLProxy: must be host or host:port, e.g. proxy.example.com:3128/);
  assert.match(ff, /AppUpdatePin: must be a version prefix ending in "."/);
  assert.match(ff, /DefaultDownloadDirectory: must not contain '..' components/);
});

Deno.test("cross-field rules say what to add", () => {
  assert.match(
    check("Chrome", { ProxyMode: "fixed_servers" }),
    /ProxyServer: is required when ProxyMode is "fixed_servers": set the proxy server/,
  );
  assert.match(
    check("Edge", { RestoreOnStartup: 4 }),
    /RestoreOnStartupURLs: is required when RestoreOnStartup is 4: list the pages to open/,
  );
  assert.match(
    check("Firefox", { Proxy: { Mode: "autoConfig" } }),
    /Proxy.AutoConfigURL: is required when Proxy.Mode is "autoConfig"/,
  );
});

Deno.test("fields the browser ignores are refused with the field to use instead", () => {
  const tb = check("Thunderbird", {
    Cookies: { Behavior: "reject", AllowSession: ["https://a.example"] },
    InAppNotification: { Enabled: false },
    Preferences: { "a.b": { Value: 1, Type: "number" } },
  });
  assert.match(
    tb,
    /Cookies.Behavior: is ignored by the browser: Thunderbird has no Cookies.Behavior; use Cookies.Default/,
  );
  assert.match(tb, /Cookies.AllowSession: is ignored by the browser/);
  assert.match(
    tb,
    /InAppNotification.Enabled: is ignored by the browser: .*set InAppNotification.Disabled instead/,
  );
  assert.match(tb, /Preferences\["a.b"\].Type: is ignored by the browser/);
  assert.match(
    check("Firefox", { Permissions: { Camera: { Default: "block-audio" } } }),
    /Permissions.Camera.Default: is ignored by the browser: Firefox has Default only for Autoplay/,
  );
});

Deno.test("additional: policy-name keys only; a curated key (any spelling) must use the typed field", () => {
  const out = check("Edge", {
    additional: {
      TrackingPrevention: 3,
      trackingprevention: 3,
      tracking_prevention: 3,
      "Bad/Key": 1,
      ["x".repeat(129)]: 1,
      FineName: { Nested: ["any", "json"] },
    },
  });
  assert.match(
    out,
    /additional.TrackingPrevention: "TrackingPrevention" is a curated setting; remove it from additional and set the typed field TrackingPrevention instead/,
  );
  assert.match(
    out,
    /additional.trackingprevention: "trackingprevention" differs only in letter case from the curated setting TrackingPrevention/,
  );
  assert.match(out, /additional.tracking_prevention: "tracking_prevention" is a curated setting/);
  assert.match(out, /additional\["Bad\/Key"\]: must look like a policy name/);
  assert.match(out, /additional.x{129}: must look like a policy name: .*at most 128 characters/);
  assert.doesNotMatch(out, /FineName/);
});

Deno.test("hostile content is refused by the shared validation for every browser type", () => {
  let deep: unknown = "x";
  for (let i = 0; i < MAX_JSON_DEPTH + 5; i++) deep = { d: deep };
  for (const type of BROWSERS) {
    for (const key of ["a/b", "..", "../../etc/passwd", "Key\u0000Nul", "Key\nNewline", ""]) {
      const issues = validatePolicyContent(type, JSON.stringify({ additional: { [key]: "pwned" } }));
      assert.ok(issues.length > 0, `${type}: additional key ${JSON.stringify(key)} must be refused`);
    }
    const big = validatePolicyContent(
      type,
      JSON.stringify({ additional: { Big: "a".repeat(10 * 1024 * 1024) } }),
    );
    assert.match(describe(big), new RegExp(`content is too large .*the limit is ${MAX_CONTENT_BYTES} bytes`));
    assert.match(
      describe(validatePolicyContent(type, JSON.stringify({ additional: { Deep: deep } }))),
      /nested too deeply/,
    );
    assert.match(
      describe(validatePolicyContent(type, JSON.stringify({ additional: { Ctl: "a\u001bb" } }))),
      /additional.Ctl: must not contain the control character U\+001B/,
    );
  }
});

async function installedSchema(
  jars: string[],
): Promise<{ jar: string; schema: Record<string, unknown> } | string> {
  for (const jar of jars) {
    const bytes = await readZipEntry(jar, "modules/policies/policies-schema.json").catch(() => undefined);
    if (bytes) return { jar, schema: JSON.parse(new TextDecoder().decode(bytes)) };
  }
  return `no policies-schema.json in ${
    jars.join(" or ")
  } (install firefox-esr and thunderbird to run this check)`;
}

/** The schema node for `path` (catalogue syntax), following $ref, properties, patternProperties, items. */
function schemaAt(root: Record<string, unknown>, path: string): unknown {
  const definitions = (root.definitions ?? {}) as Record<string, unknown>;
  // deno-lint-ignore no-explicit-any -- JSON Schema is untyped here
  const resolve = (node: any): any =>
    node?.$ref ? resolve(definitions[String(node.$ref).split("/").pop()!]) : node;
  // deno-lint-ignore no-explicit-any -- as above
  let node: any = root;
  for (const part of path.replaceAll("[]", ".[]").split(".")) {
    node = resolve(node);
    if (!node) return undefined;
    if (part === "[]") {
      node = node.items;
      continue;
    }
    const alternatives = [node, ...(node.anyOf ?? []), ...(node.oneOf ?? [])].map(resolve);
    let next: unknown;
    for (const alt of alternatives) {
      if (part === "*") {
        next = alt?.patternProperties ? Object.values(alt.patternProperties).at(-1) : alt?.properties?.["*"];
        if (next) {
          // Merge the "*" entry with the per-id entry, as both describe map values.
          const star = alt?.properties?.["*"];
          next = { properties: { ...resolve(star)?.properties, ...resolve(next)?.properties } };
          break;
        }
      } else {
        next = alt?.properties?.[part] ??
          Object.entries(alt?.patternProperties ?? {}).find(([re]) => new RegExp(re).test(part))?.[1];
        if (next) break;
      }
    }
    node = next;
  }
  return resolve(node);
}

for (
  const [type, jars] of [
    ["Firefox", ["/usr/lib/firefox-esr/browser/omni.ja", "/usr/lib/firefox/browser/omni.ja"]],
    ["Thunderbird", ["/usr/lib/thunderbird/omni.ja"]],
  ] as const
) {
  Deno.test(`catalogue agrees with the installed ${type}'s policies-schema.json (skips without ${type})`, async () => {
    const found = await installedSchema([...jars]);
    if (typeof found === "string") {
      console.log(`skipped: ${found}`);
      return;
    }
    const d = def(type);
    const notInSchema = Object.entries(d.fieldInfo)
      .filter(([, info]) => !info.unsupported && !info.deprecated)
      .map(([path]) => path)
      .filter((path) => schemaAt(found.schema, path) === undefined);
    assert.deepEqual(notInSchema, [], `${type} catalogue paths ${found.jar} does not know`);
    // Every unsupported field really is unknown to this version (so the refusal is not a guess).
    for (const [path, info] of Object.entries(d.fieldInfo)) {
      if (info.unsupported) assert.equal(schemaAt(found.schema, path), undefined, `${path} is unsupported`);
    }
    // Enumerations agree where the schema has one.
    for (const [path, info] of Object.entries(d.fieldInfo)) {
      // deno-lint-ignore no-explicit-any -- JSON Schema
      const node = schemaAt(found.schema, path) as any;
      const schemaEnum = node?.enum ?? node?.items?.enum;
      if (!info.enum || !schemaEnum || info.format === "comma_list") continue;
      const ours = info.enum.map((o) => o.value);
      assert.deepEqual(
        ours.filter((v) => !schemaEnum.includes(v)),
        [],
        `${type} ${path}: values the browser does not accept`,
      );
    }
  });
}
