/**
 * The policy type registry: valid examples of every known type pass; a hostile corpus fails with a message
 * that names the problem; unknown types pass; canonical JSON is stable; the sanitizers refuse what they
 * exist to refuse.
 */
import assert from "node:assert/strict";
import { richRuleProblem } from "../../shared/firewalld_rich_rule.ts";
import {
  canonicalPolicyContent,
  getPolicyType,
  listPolicyTypes,
  MAX_CONTENT_BYTES,
  typedContentFor,
  validatePolicyContent,
  type ValidationIssue,
} from "../../shared/policy_types/mod.ts";
import {
  absolutePathUnder,
  dconfPath,
  fileNameComponent,
  firewalldSource,
  gvariantText,
  ipAddress,
  portSpec,
  singleLine,
  unixGroupName,
  unixUserName,
  urlWithScheme,
} from "../../shared/policy_types/sanitizers.ts";
import { jsonDepth } from "../../shared/policy_types/json_guard.ts";
import { makeCertificate } from "../helpers/test_ca.ts";

const WIRE_NAMES = [
  "Firefox",
  "Thunderbird",
  "Chrome",
  "Edge",
  "Dconf",
  "Firewalld",
  "Polkit",
  "Flatpak",
  "SessionAccess",
  "DiskEncryption",
  "Kconfig",
  // Beyond the spec (issue 35).
  "Privilege",
  "Scripts",
  "Certificates",
  "Proxy",
];

interface TypeCorpus {
  /** Contents that must validate. */
  valid: unknown[];
  /** Parses, but configures nothing. */
  noSetting: unknown;
  /** A value that becomes a path or file name, climbing out with `../`. */
  traversal: unknown;
  /** A NUL or newline where it would break the generated file or command. */
  controlChar: unknown;
  /** A field of the wrong JSON type. */
  wrongType: unknown;
}

const GPG_KEY = btoa("not really a key, but base64 text of one");
const CA_PEM = (await makeCertificate({ key: "ec:P-256", subject: "/CN=Corpus Root" })).pem;

const CORPUS: Record<string, TypeCorpus> = {
  Firefox: {
    valid: [
      { DisableTelemetry: true },
      { disable_telemetry: false, Homepage: { URL: "https://intranet.example", StartPage: "homepage" } },
      {
        SSLVersionMin: "tls1.2",
        Bookmarks: [{ Title: "Wiki", URL: "https://wiki.example", Placement: "toolbar" }],
        ExtensionSettings: { "uBlock0@raymondhill.net": { installation_mode: "force_installed" } },
        additional: { SomeFuturePolicy: { Enabled: true } },
      },
    ],
    noSetting: { Homepage: {} },
    traversal: { additional: { "../../etc/passwd": true } },
    controlChar: { Homepage: { URL: "https://a.example/\nSet-Cookie: x" } },
    wrongType: { DisableTelemetry: "yes" },
  },
  Thunderbird: {
    valid: [{ DisableTelemetry: true }, { SSLVersionMin: "tls1.3", Proxy: { Mode: "system" } }],
    noSetting: { Proxy: {} },
    traversal: { additional: { "a/../b": 1 } },
    controlChar: { DNSOverHTTPS: { ProviderURL: "https://doh.example/\u0000" } },
    wrongType: { Proxy: "system" },
  },
  Chrome: {
    valid: [{ HomepageLocation: "https://example.com" }, {
      RestoreOnStartup: 4,
      RestoreOnStartupURLs: ["https://a.example"],
    }],
    noSetting: { additional: {} },
    traversal: { additional: { "..": "x" } },
    controlChar: { HomepageLocation: "https://example.com/\r\nx" },
    wrongType: { RestoreOnStartup: "four" },
  },
  Edge: {
    valid: [{ HomepageLocation: "https://example.com" }, { TrackingPrevention: 3 }],
    noSetting: { ExtensionSettings: {} },
    traversal: { additional: { "x/../y": 1 } },
    controlChar: { NewTabPageLocation: "https://example.com/\nx" },
    wrongType: { TrackingPrevention: [3] },
  },
  Dconf: {
    valid: [
      {
        entries: [{
          schema_id: "org.gnome.desktop.screensaver",
          key: "lock-delay",
          value: "uint32 300",
          lock: true,
        }],
      },
      {
        db_name: "local",
        entries: [
          {
            schemaId: "org.gnome.desktop.background",
            key: "picture-uri",
            value: "'file:///usr/share/a.png'",
          },
          {
            schema_id: "org.gnome.Terminal.Legacy.Profile",
            path: "/org/gnome/terminal/legacy/profiles:/:abc/",
            key: "font",
            value: "'Monospace 12'",
          },
        ],
      },
    ],
    noSetting: { entries: [] },
    traversal: { db_name: "../../etc", entries: [{ schema_id: "org.a.b", key: "k", value: "1" }] },
    controlChar: { entries: [{ schema_id: "org.a.b", key: "k", value: "'x'\n[org/evil]\nk=1" }] },
    wrongType: { entries: "lock-delay" },
  },
  Firewalld: {
    valid: [
      { zones: [{ name: "public", services: ["ssh"], ports: [{ port: "443", protocol: "tcp" }] }] },
      {
        zones: [{
          name: "internal",
          target: "FIREWALLD_TARGET_DROP",
          sources: ["10.0.0.0/8", "mac:00:11:22:33:44:55"],
          rich_rules: ['rule family="ipv4" source address="10.0.0.0/8" service name="ssh" accept'],
          forward_ports: [{ port: "80", protocol: "tcp", to_port: "8080" }],
        }],
      },
    ],
    noSetting: { zones: [] },
    traversal: { zones: [{ name: "../../etc/shadow" }] },
    controlChar: { zones: [{ name: "public", rich_rules: ['rule service name="ssh" accept\n</zone>'] }] },
    wrongType: { zones: { name: "public" } },
  },
  Polkit: {
    valid: [
      {
        rules: [{
          name: "deny-mount",
          action_ids: ["org.freedesktop.udisks2.filesystem-mount"],
          result: "POLKIT_RESULT_NO",
          match: { unix_groups: ["students"] },
        }],
      },
      {
        rules: [{ actionPrefixes: ["org.freedesktop.NetworkManager."], result: "POLKIT_RESULT_AUTH_ADMIN" }],
      },
    ],
    noSetting: { rules: [] },
    traversal: { rules: [{ action_ids: ["../../x"], result: "POLKIT_RESULT_YES" }] },
    controlChar: {
      rules: [{
        description: "x\n}); polkit.addRule(function() { return polkit.Result.YES; }); //",
        action_ids: ["org.a.b"],
        result: "POLKIT_RESULT_NO",
      }],
    },
    wrongType: { rules: [{ action_ids: "org.a.b", result: "POLKIT_RESULT_NO" }] },
  },
  Flatpak: {
    valid: [
      {
        remotes: [{ name: "flathub", url: "https://dl.flathub.org/repo/", gpg_key: GPG_KEY }],
        apps: [{ app_id: "org.mozilla.firefox", remote: "flathub", state: "FLATPAK_APP_STATE_PRESENT" }],
      },
      { apps: [{ app_id: "org.gimp.GIMP", state: "FLATPAK_APP_STATE_ABSENT", delete_data: true }] },
    ],
    noSetting: { remotes: [], apps: [] },
    traversal: { remotes: [{ name: "../../../etc/cron.d/x", url: "https://a.example/", gpg_key: GPG_KEY }] },
    controlChar: {
      remotes: [{ name: "r", url: "https://a.example/", gpg_key: GPG_KEY, title: "Repo\u0000x" }],
    },
    wrongType: { apps: [{ app_id: 42 }] },
  },
  SessionAccess: {
    valid: [
      {
        rules: [{
          users: ["alice"],
          effect: "SESSION_ACCESS_EFFECT_ALLOW",
          windows: [{ days: ["WEEKDAY_MONDAY"], start: "08:00", end: "17:30" }],
        }],
        time_zone: "Europe/Berlin",
      },
      {
        rules: [{
          groups: ["kids"],
          effect: "SESSION_ACCESS_EFFECT_DENY",
          windows: [{ start: "22:00", end: "06:00" }],
        }],
      },
    ],
    noSetting: { rules: [], pam_enforcement: true },
    traversal: {
      time_zone: "../../../etc/passwd",
      rules: [{ users: ["alice"], effect: "SESSION_ACCESS_EFFECT_ALLOW" }],
    },
    controlChar: { rules: [{ users: ["alice\nroot"], effect: "SESSION_ACCESS_EFFECT_DENY" }] },
    wrongType: { rules: [{ users: ["alice"], effect: "SESSION_ACCESS_EFFECT_ALLOW", windows: "always" }] },
  },
  DiskEncryption: {
    valid: [
      { require_encryption: true, min_luks_version: 2 },
      // LUKS1 notation as cryptsetup prints a LUKS1 header's cipher.
      { require_encryption: true, allowed_ciphers: ["aes-xts-plain64", "aes-cbc-essiv:sha256"] },
      {
        escrow_recovery_key: true,
        recovery_key_rotation_days: 180,
        tpm2: { enroll: true, pcrs: [7, 14] },
        tang: {
          servers: [{ url: "http://tang.example", thumbprint: "x2rUQ3eRyH3LxmC0aCRm9Ucmn7Q" }],
          threshold: 1,
        },
      },
    ],
    noSetting: { tpm2: null },
    traversal: { require_encryption: true, allowed_ciphers: ["../../bin/sh"] },
    controlChar: {
      tang: { servers: [{ url: "http://tang.example/\n", thumbprint: "x2rUQ3eRyH3LxmC0aCRm9Ucmn7Q" }] },
    },
    wrongType: { require_encryption: "yes" },
  },
  Kconfig: {
    valid: [
      {
        entries: [{ file: "kscreenlockerrc", group: "Daemon", key: "Timeout", value: "5", immutable: true }],
      },
      {
        action_restrictions: { shell_access: false, "action/logout": false },
        kcm_restrictions: ["kcm_kscreen"],
      },
    ],
    noSetting: { entries: [], kcm_restrictions: [] },
    traversal: { entries: [{ file: "../../../etc/profile.d/evil.sh", group: "G", key: "k", value: "v" }] },
    controlChar: { entries: [{ file: "kdeglobals", group: "General", key: "k", value: "v\n[$i]\nevil=1" }] },
    wrongType: { kcm_restrictions: "kcm_kscreen" },
  },
  Privilege: {
    valid: [
      { entries: [{ user: "alice", effect: "PRIVILEGE_EFFECT_ALLOW", sudo_nopasswd: true }] },
      { entries: [{ group: "domain admins", effect: 1 }], local_sudo_group_not_admin: true },
      { local_sudo_group_not_admin: true },
    ],
    noSetting: { entries: [] },
    traversal: { entries: [{ user: "../../etc/sudoers", effect: 1 }] },
    controlChar: { entries: [{ user: "alice\nALL", effect: 1 }] },
    wrongType: { entries: "alice" },
  },
  Scripts: {
    valid: [
      { scripts: [{ name: "hello", trigger: "SCRIPT_TRIGGER_MACHINE_STARTUP", body: "echo hello\n" }] },
      { scripts: [{ name: "greet", trigger: 3, interpreter: 2, body: 'echo "$USER"', timeout_seconds: 60 }] },
    ],
    noSetting: { scripts: [] },
    traversal: { scripts: [{ name: "../../etc/systemd/system/x", trigger: 1, body: "true" }] },
    controlChar: { scripts: [{ name: "a", trigger: 1, body: "true\u0000" }] },
    wrongType: { scripts: "echo" },
  },
  Certificates: {
    valid: [{ certificates: [{ name: "corp-root", pem: CA_PEM }] }],
    noSetting: { certificates: [] },
    traversal: { certificates: [{ name: "../../etc/ssl/evil", pem: CA_PEM }] },
    controlChar: { certificates: [{ name: "root\nx", pem: CA_PEM }] },
    wrongType: { certificates: "corp-root" },
  },
  Proxy: {
    valid: [
      {
        manual: { http: { host: "proxy.example.com", port: 3128 } },
        no_proxy: [".example.com", "10.0.0.0/8"],
      },
      { pacUrl: "https://wpad.example.com/proxy.pac" },
      { manual: { http: { host: "10.1.2.3", port: 8080 }, https: { host: "fd00::1", port: 8443 } } },
    ],
    noSetting: { no_proxy: [] },
    traversal: { manual: { http: { host: "../../etc/passwd", port: 3128 } } },
    controlChar: { pac_url: "https://wpad.example.com/\nproxy.pac" },
    wrongType: { manual: "proxy.example.com:3128" },
  },
};

function json(value: unknown): string {
  return JSON.stringify(value);
}

function describe(issues: ValidationIssue[]): string {
  return issues.map((i) => `${i.field}: ${i.message}`).join("; ");
}

Deno.test("every wire name of the spec is registered, with its typed_content member and merge rule", () => {
  assert.deepEqual(listPolicyTypes().map((t) => t.wireName), WIRE_NAMES);
  const merges = Object.fromEntries(listPolicyTypes().map((t) => [t.wireName, t.merge]));
  assert.equal(merges.Dconf, "priority_merge");
  assert.equal(merges.Flatpak, "priority_merge");
  assert.equal(merges.Polkit, "file_per_policy");
  assert.equal(merges.Firewalld, "file_per_policy");
  assert.equal(merges.SessionAccess, "union");
  assert.equal(merges.Certificates, "union");
  assert.equal(merges.Proxy, "priority_merge");
  assert.equal(getPolicyType("DiskEncryption")?.typedContentCase, "diskEncryptionPolicy");
  assert.equal(getPolicyType("firefox"), undefined, "wire names are case-sensitive");
});

for (const wireName of WIRE_NAMES) {
  const corpus = CORPUS[wireName];

  Deno.test(`${wireName}: valid examples pass and canonicalise stably`, () => {
    for (const example of corpus.valid) {
      const issues = validatePolicyContent(wireName, json(example));
      assert.deepEqual(issues, [], `${json(example)} → ${describe(issues)}`);
      const canonical = canonicalPolicyContent(wireName, json(example))!;
      assert.equal(canonicalPolicyContent(wireName, canonical), canonical, "canonical form is a fixed point");
      assert.deepEqual(validatePolicyContent(wireName, canonical), []);
    }
  });

  Deno.test(`${wireName}: hostile contents fail with a message naming the problem`, () => {
    const expect = (content: string, pattern: RegExp, label: string) => {
      const issues = validatePolicyContent(wireName, content);
      assert.ok(issues.length > 0, `${label} must fail`);
      assert.match(describe(issues), pattern, `${label}: ${describe(issues)}`);
    };
    expect("", /policy content is empty/, "empty");
    expect("   \n ", /policy content is empty/, "blank");
    expect("{}", /policy content is empty/, "{}");
    expect("{ }", /policy content is empty/, "{ }");
    expect('{"unterminated": ', /policy content is invalid: content is not valid JSON/, "malformed");
    expect("[1, 2]", /policy content is invalid/, "array");
    expect(
      '{"NoSuchSetting": true}',
      /policy content is invalid: unknown field "NoSuchSetting"/,
      "unknown field",
    );
    expect(json(corpus.noSetting), /policy content needs at least one (setting|rule)/, "no setting");
    expect(json(corpus.traversal), /path|file name|'\/'|must|policy name|not a valid/, "../ in a name");
    expect(json(corpus.controlChar), /newline|NUL|carriage return|control/, "NUL/newline");
    expect(
      json(corpus.wrongType),
      /policy content is invalid: .*(expected|must be a JSON object)/,
      "wrong type",
    );
    const huge = `{"x": "${"A".repeat(10 * 1024 * 1024)}"}`;
    expect(
      huge,
      new RegExp(`too large \\(\\d+ bytes\\); the limit is ${MAX_CONTENT_BYTES} bytes`),
      "10 MB string",
    );
    expect(`{"x": "${"A".repeat(100_000)}"}`, /x: text is too long \(100000 characters\)/, "100 kB string");
    const deep = `{"x": ${"[".repeat(100_000)}${"]".repeat(100_000)}}`;
    expect(deep, /nested too deeply/, "deep nesting");
  });
}

Deno.test("unknown types pass validation unchanged (forward compatibility)", () => {
  assert.deepEqual(validatePolicyContent("FutureThing", ""), []);
  assert.deepEqual(validatePolicyContent("FutureThing", "not json at all"), []);
  assert.equal(canonicalPolicyContent("FutureThing", "{}"), undefined);
  assert.equal(typedContentFor("FutureThing", "{}"), undefined);
});

Deno.test("issues name the field and the fix", () => {
  const issues = validatePolicyContent(
    "Polkit",
    json({
      rules: [{ action_ids: ["a.b"], result: "POLKIT_RESULT_NO" }, {}, { result: "POLKIT_RESULT_YES" }],
    }),
  );
  assert.deepEqual(issues.find((i) => i.field === "rules[2].action_ids"), {
    field: "rules[2].action_ids",
    message: "at least one action id (or action prefix) is required",
  });
  assert.ok(issues.some((i) => i.field === "rules[1].result" && /choose a result/.test(i.message)));
});

Deno.test("snake_case and json_name spellings canonicalise to the same text; browsers keep policy key names", () => {
  const a = canonicalPolicyContent(
    "Dconf",
    json({ entries: [{ schemaId: "org.a.b", key: "k", value: "1" }] }),
  );
  const b = canonicalPolicyContent(
    "Dconf",
    json({ entries: [{ schema_id: "org.a.b", key: "k", value: "1" }] }),
  );
  assert.equal(a, b);
  assert.equal(a, '{"entries":[{"key":"k","schema_id":"org.a.b","value":"1"}]}');
  const ff = canonicalPolicyContent(
    "Firefox",
    json({ disable_telemetry: true, additional: { Zeta: 1, Alpha: 2 } }),
  );
  assert.equal(ff, '{"DisableTelemetry":true,"additional":{"Alpha":2,"Zeta":1}}');
});

Deno.test("the stream conversion ignores unknown fields; validation does not", () => {
  const content = json({ DisableTelemetry: true, AddedInAFutureVersion: 1 });
  assert.match(describe(validatePolicyContent("Firefox", content)), /unknown field "AddedInAFutureVersion"/);
  const typed = typedContentFor("Firefox", content)!;
  assert.equal(typed.case, "firefoxPolicy");
  assert.equal((typed.value as unknown as { disableTelemetry: boolean }).disableTelemetry, true);
  assert.throws(() => typedContentFor("Firefox", "{broken"), /not valid JSON/);
});

Deno.test("browser escape hatch: additional keys must look like policy names and not shadow curated fields", () => {
  const issues = validatePolicyContent(
    "Chrome",
    json({
      additional: { HomepageLocation: "https://x.example", "bad key": 1, _comment: "x", Fine_Name2: [1] },
    }),
  );
  assert.equal(issues.length, 3, describe(issues));
  assert.match(describe(issues), /additional.HomepageLocation: "HomepageLocation" is a curated setting/);
  assert.match(describe(issues), /additional\["bad key"\]: must look like a policy name/);
  assert.match(describe(issues), /additional._comment: must look like a policy name/);
});

Deno.test("browser enumerations and URL schemes are checked", () => {
  const ff = describe(validatePolicyContent(
    "Firefox",
    json({
      SSLVersionMin: "ssl3",
      Homepage: { URL: "javascript:alert(1)" },
      Bookmarks: [{ URL: "file:///etc/passwd" }],
      DNSOverHTTPS: { ProviderURL: "http://doh.example" },
      Proxy: { SOCKSVersion: 6 },
    }),
  ));
  assert.match(ff, /SSLVersionMin: must be one of "tls1", "tls1.1", "tls1.2", "tls1.3"/);
  assert.match(ff, /Homepage.URL: URL scheme must be http or https, not "javascript"/);
  assert.match(ff, /Bookmarks\[0\].URL: URL scheme must be http or https, not "file"/);
  assert.match(ff, /DNSOverHTTPS.ProviderURL: URL scheme must be https, not "http"/);
  assert.match(ff, /Proxy.SOCKSVersion: must be one of 4, 5/);
  assert.match(
    describe(validatePolicyContent("Chrome", json({ RestoreOnStartup: 2 }))),
    /must be one of 1, 4, 5/,
  );
});

Deno.test("type-specific rules: duplicates, enums set, cross-field rules, root", () => {
  const dconf = describe(validatePolicyContent(
    "Dconf",
    json({
      entries: [{ schema_id: "org.a.b", key: "k", value: "1" }, {
        schema_id: "org.a.b",
        key: "k",
        value: "2",
      }],
    }),
  ));
  assert.match(dconf, /entries\[1\].key: repeats entries\[0\]/);
  const fw = describe(validatePolicyContent(
    "Firewalld",
    json({
      zones: [{
        name: "a",
        forward_ports: [{ port: "80", protocol: "tcp" }],
        ports: [{ port: "0-5", protocol: "icmp" }],
      }],
    }),
  ));
  assert.match(fw, /forward_ports\[0\]: needs to_port, to_addr or both/);
  assert.match(fw, /ports\[0\].port: ports must be between 1 and 65535/);
  assert.match(fw, /ports\[0\].protocol: must be one of "tcp", "udp", "sctp", "dccp"/);
  const polkit = describe(
    validatePolicyContent("Polkit", json({ rules: [{ action_ids: ["a.b"], result: 99 }] })),
  );
  assert.match(polkit, /rules\[0\].result: 99 is not a known value/);
  const session = describe(validatePolicyContent(
    "SessionAccess",
    json({
      include_ssh: true,
      rules: [{ users: ["root"], effect: "SESSION_ACCESS_EFFECT_ALLOW" }],
    }),
  ));
  assert.match(session, /include_ssh: only applies with pam_enforcement/);
  assert.match(session, /rules\[0\].users\[0\]: root is never restricted/);
  const disk = describe(validatePolicyContent(
    "DiskEncryption",
    json({
      recovery_key_rotation_days: 30,
      tpm2: { pcrs: [7, 7, 24] },
    }),
  ));
  assert.match(disk, /recovery_key_rotation_days: only applies with escrow_recovery_key/);
  assert.match(disk, /tpm2.pcrs\[1\]: PCR 7 is listed twice/);
  assert.match(disk, /tpm2.pcrs\[2\]: must be a PCR number between 0 and 23/);
  const flatpak = describe(validatePolicyContent(
    "Flatpak",
    json({
      remotes: [{
        name: "r",
        url: "https://a.example/",
        gpg_key: GPG_KEY,
        filter: "allow org.a.*\nrm -rf /",
      }],
    }),
  ));
  assert.match(flatpak, /remotes\[0\].filter: line 2 must be/);
  const kconfig = describe(validatePolicyContent(
    "Kconfig",
    json({
      url_restrictions: [{ action: "KCONFIG_URL_ACTION_OPEN", host: "a.example,evil" }],
    }),
  ));
  assert.match(kconfig, /url_restrictions\[0\].host: must not contain ','/);
});

Deno.test("sanitizers refuse traversal, control characters and malformed values", () => {
  for (const bad of ["", ".", "..", "../etc", "a/b", "a\\b", "name with space", "x;rm -rf", "a\u0000b"]) {
    assert.ok(fileNameComponent(bad), `fileNameComponent(${JSON.stringify(bad)})`);
  }
  for (const good of ["local", "svc-repo", "repo_1", "a.b.c", "ABC123"]) {
    assert.equal(fileNameComponent(good), undefined);
  }
  const under = absolutePathUnder(["/etc/svc/"]);
  assert.equal(under("/etc/svc/a.conf"), undefined);
  for (const bad of ["etc/svc/a", "/etc/svc/../shadow", "/etc/passwd", "/etc/svc//a", "/etc/svc/a\n"]) {
    assert.ok(under(bad), bad);
  }
  assert.equal(singleLine("a\tb"), "must not contain a tab");
  assert.ok(gvariantText("['a', 'b'"));
  assert.ok(gvariantText("'a''"));
  assert.equal(gvariantText("['a', 'b]']"), undefined, "brackets inside strings do not count");
  assert.ok(dconfPath("/org/../etc/"));
  assert.ok(urlWithScheme(["https"])("https://"));
  assert.equal(portSpec("5000-6000"), undefined);
  assert.ok(portSpec("6000-5000"));
  assert.equal(ipAddress("2001:db8::1"), undefined);
  assert.ok(ipAddress("256.1.1.1"));
  assert.ok(firewalldSource("ipset:../x"));
  assert.ok(unixUserName('alice"'));
  assert.equal(unixGroupName("domain users"), undefined);
  assert.ok(unixGroupName(" leading"));
  assert.match(richRuleProblem('rule service name="ssh" accept') ?? "ok", /^ok$/);
  assert.match(richRuleProblem('rule service name="ssh accept') ?? "", /has no closing "/);
  assert.match(richRuleProblem("rule family=ipv4") ?? "", /needs a match element/);
  assert.match(richRuleProblem('rule exec cmd="rm"') ?? "", /unknown token "exec"/);
  assert.equal(jsonDepth('{"a": "[[[[[["}'), 1, "brackets in strings are not nesting");
});

Deno.test("Kconfig names: refused where no KDE name goes, each named by its field; real KDE names pass", () => {
  const entry = (group: string, key: string, subgroups: string[] = []) =>
    json({ entries: [{ file: "kdeglobals", group, subgroups, key, value: "1" }] });
  const refusedGroups = [
    "..",
    "a..b",
    "a/b",
    "/etc",
    "a|b",
    "<default>",
    "a<b",
    "a>b",
    "`id`",
    "-rf",
    "--help",
  ];
  for (const group of refusedGroups) {
    assert.match(
      describe(validatePolicyContent("Kconfig", entry(group, "k"))),
      /^entries\[0\]\.group: /,
      group,
    );
    assert.match(
      describe(validatePolicyContent("Kconfig", entry("General", "k", ["ok", group]))),
      /^entries\[0\]\.subgroups\[1\]: /,
      group,
    );
  }
  const refusedKeys = [
    "..",
    "a/../b",
    "/etc/shadow",
    "action/",
    "a//b",
    "a|b",
    "a<b",
    "a>b",
    "`id`",
    "-rf",
    "--help",
  ];
  for (const key of [...refusedKeys, "a\u0001b", "a\u001bb", "a\u007fb"]) {
    assert.match(
      describe(validatePolicyContent("Kconfig", entry("General", key))),
      /^entries\[0\]\.key: /,
      key,
    );
  }
  assert.match(
    describe(validatePolicyContent("Kconfig", json({ action_restrictions: { "action/../x": false } }))),
    /^action_restrictions\["action\/..\/x"\]: must not contain '..'/,
  );
  // Names from real KDE files: kdeglobals, kwinrc, kcminputrc, kscreenlockerrc, kglobalshortcutsrc, Kiosk.
  const real: [string, string[], string][] = [
    ["KDE Action Restrictions", [], "action/logout"],
    ["KDE Action Restrictions", [], "plasma/plasmashell/unlockedDesktop"],
    ["KDE Action Restrictions", [], "run_command"],
    ["org.kde.kdecoration2", [], "library"],
    ["Effect-overview", [], "BorderActivate"],
    ["Libinput", ["1739", "52619", "SYNA8004:00 06CB:CD8B Touchpad"], "NaturalScroll"],
    ["Greeter", ["Wallpaper", "org.kde.image", "General"], "Image"],
    ["Containments", ["1", "Applets", "2", "Configuration", "General"], "launchers"],
    ["kwin", [], "Walk Through Windows (Reverse)"],
    ["Plugin-org.kde.ActivityManager.Resources.Scoring", [], "what-to-remember"],
    ["KDE", [], "widgetStyle"],
    ["services", ["org.kde.konsole.desktop"], "_launch"],
  ];
  for (const [group, subgroups, key] of real) {
    assert.deepEqual(validatePolicyContent("Kconfig", entry(group, key, subgroups)), [], `${group} ${key}`);
  }
  assert.deepEqual(
    validatePolicyContent(
      "Kconfig",
      json({ action_restrictions: { "action/logout": false, shell_access: false } }),
    ),
    [],
  );
});

Deno.test("Firewalld: option-like zone names and line breaks in names and descriptions are refused", () => {
  const zone = (z: Record<string, unknown>) => json({ zones: [{ name: "public", services: ["ssh"], ...z }] });
  for (const name of ["-rf", "--help", "-", "--zone=trusted", "-public"]) {
    assert.match(
      describe(validatePolicyContent("Firewalld", zone({ name }))),
      /^zones\[0\]\.name: must (start with a letter or digit|be a zone name)/,
      name,
    );
    assert.match(
      describe(validatePolicyContent("Firewalld", json({ default_zone: name, zones: [{ name: "public" }] }))),
      /^default_zone: must /,
    );
  }
  for (const text of ["a\nb", "a\r\nb", "a\tb", "a\u0000b", "a\u001bb", "a\u2028b", "a\u0085b"]) {
    assert.match(
      describe(validatePolicyContent("Firewalld", zone({ description: text }))),
      /^zones\[0\]\.description: /,
    );
    assert.match(describe(validatePolicyContent("Firewalld", zone({ short: text }))), /^zones\[0\]\.short: /);
  }
  // firewalld's own zones (Debian 12's firewalld 1.3), libvirt's and Docker's.
  for (
    const name of [
      "public",
      "nm-shared",
      "FedoraWorkstation",
      "libvirt-routed",
      "docker",
      "trusted",
      "a_b",
      "9",
    ]
  ) {
    assert.deepEqual(validatePolicyContent("Firewalld", zone({ name })), [], name);
  }
  assert.deepEqual(
    validatePolicyContent(
      "Firewalld",
      zone({
        short: "Public",
        description:
          "For use in public areas. You do not trust the other computers on networks to not harm your computer. Only selected incoming connections are accepted.",
      }),
    ),
    [],
  );
});
