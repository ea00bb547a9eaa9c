/**
 * The four browser enforcers on a temp root with the real sync engine: each writes its files where its
 * installed browsers read them and reads them back COMPLIANT; nothing installed → INAPPLICABLE and nothing
 * written; conflicting policies give the documented winner for every cache order (property test with
 * fast-check, through the real engine); losers are INAPPLICABLE naming the winner; a Chrome-family file that
 * sorts after svc's overrides keys (NON_COMPLIANT naming it); hostile content never reaches the disk.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { typedContentFor } from "../../shared/policy_types/mod.ts";
import { chromeType } from "../../shared/policy_types/chrome.ts";
import type { BrowserTypeDef } from "../../shared/policy_types/browser.ts";
import { CHROMIUM_FILE_NAME, chromiumEnforcer } from "../../agent/enforcers/chromium.ts";
import { CHROME_BROWSERS } from "../../agent/enforcers/chrome.ts";
import { enforcerRegistry, ENFORCERS } from "../../agent/enforcers/mod.ts";
import { listPolicyTypes } from "../../shared/policy_types/mod.ts";
import { MOZILLA_MARKER_KEY } from "../../agent/enforcers/mozilla.ts";
import type { CachedPolicy, PolicyResult } from "../../agent/sync/types.ts";
import { engineFor, nodeTest, type TempNode, tempNode } from "./helpers.ts";

const ARCH = Deno.build.arch;
const CHROMIUM_DIR = "/etc/chromium/policies/managed";
const CHROMIUM_FILE = `${CHROMIUM_DIR}/${CHROMIUM_FILE_NAME}`;

/** A cached policy as the stream delivers it (content plus the server's typed parse). */
function cached(
  type: string,
  content: Record<string, unknown>,
  options: { id: string; priority?: number; name?: string },
): CachedPolicy {
  const text = JSON.stringify(content);
  return {
    id: options.id,
    name: options.name ?? options.id,
    type,
    version: 1,
    priority: options.priority ?? 0,
    content: text,
    typed: typedContentFor(type, text)?.value,
  };
}

async function install(node: TempNode, ...paths: string[]): Promise<void> {
  for (const path of paths) await Deno.mkdir(`${node.root}${path}`, { recursive: true });
}

async function readJson(node: TempNode, path: string): Promise<Record<string, unknown> | undefined> {
  try {
    return JSON.parse(await Deno.readTextFile(`${node.root}${path}`));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

async function exists(node: TempNode, path: string): Promise<boolean> {
  return await Deno.stat(`${node.root}${path}`).then(() => true, () => false);
}

async function sync(node: TempNode, policies: CachedPolicy[]): Promise<Map<string, PolicyResult>> {
  const { engine, reports } = await engineFor(node);
  for (const p of policies) engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: false });
  engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();
  return reports;
}

function itemsByKey(result: PolicyResult | undefined, schemaId?: string): Record<string, string> {
  return Object.fromEntries(
    (result?.items ?? []).filter((i) => !schemaId || i.schemaId === schemaId).map((i) => [i.key, i.status]),
  );
}

Deno.test("every policy type has an enforcer, and the browser ones notify users after a change", () => {
  assert.deepEqual(
    ENFORCERS.map((e) => e.type).sort(),
    listPolicyTypes().map((t) => t.wireName).sort(),
    "a type without an enforcer would be reported unsupported on every node",
  );
  const browsers = ENFORCERS.filter((e) => ["Firefox", "Thunderbird", "Chrome", "Edge"].includes(e.type));
  assert.equal(browsers.length, 4);
  assert.ok(browsers.every((e) => e.notifiesUsers));
});

nodeTest("Thunderbird: system and Flatpak policies.json with the marker, read back COMPLIANT", {
  make: () => tempNode({ firefox: false, original: null }),
}, async (node) => {
  await install(node, "/usr/lib/thunderbird", "/var/lib/flatpak/app/org.mozilla.Thunderbird");
  const p = cached("Thunderbird", {
    DisableTelemetry: true,
    Cookies: { Default: false, Allow: ["https://mail.example"] },
    additional: { DisabledCiphers: { TLS_RSA_WITH_3DES_EDE_CBC_SHA: true } },
  }, { id: "tb" });
  const reports = await sync(node, [p]);
  const expected = {
    DisableTelemetry: true,
    Cookies: { Default: false, Allow: ["https://mail.example"] },
    DisabledCiphers: { TLS_RSA_WITH_3DES_EDE_CBC_SHA: true },
  };
  const system = await readJson(node, "/etc/thunderbird/policies/policies.json");
  const flatpak = await readJson(
    node,
    `/var/lib/flatpak/extension/org.mozilla.Thunderbird.systemconfig/${ARCH}/stable/policies/policies.json`,
  );
  assert.deepEqual(system?.policies, expected);
  assert.deepEqual(flatpak, system);
  assert.match(String(system?.[MOZILLA_MARKER_KEY]), /managed by svc .*Thunderbird policy/);
  assert.equal(reports.get("tb")?.status, "COMPLIANT", reports.get("tb")!.message);
  assert.equal(reports.get("tb")?.items.length, 6, "3 keys × 2 files");
  const mode = (await Deno.stat(`${node.root}/etc/thunderbird/policies/policies.json`)).mode! & 0o777;
  assert.equal(mode, 0o644);
});

nodeTest(
  "Chrome: one svc_policies.json per installed Chrome-family browser, plain JSON, read back COMPLIANT",
  { make: () => tempNode({ firefox: false, original: null }) },
  async (node) => {
    await install(
      node,
      "/opt/google/chrome",
      "/usr/lib/chromium",
      "/usr/bin/chromium-browser",
      "/var/lib/flatpak/app/org.chromium.Chromium",
    );
    const content = {
      HomepageLocation: "https://intranet.example/",
      URLBlocklist: ["example.org"],
      ExtensionSettings: { "*": { installation_mode: "blocked" } },
      additional: { BrowserLabsEnabled: false },
    };
    const reports = await sync(node, [cached("Chrome", content, { id: "c" })]);
    const dirs = [
      "/etc/opt/chrome/policies/managed",
      CHROMIUM_DIR,
      "/etc/chromium-browser/policies/managed",
      `/var/lib/flatpak/extension/org.chromium.Chromium.Extension.system-policies/${ARCH}/1/policies/managed`,
    ];
    for (const dir of dirs) {
      assert.deepEqual(await readJson(node, `${dir}/svc_policies.json`), {
        BrowserLabsEnabled: false,
        ExtensionSettings: { "*": { installation_mode: "blocked" } },
        HomepageLocation: "https://intranet.example/",
        URLBlocklist: ["example.org"],
      }, dir);
    }
    const result = reports.get("c")!;
    assert.equal(result.status, "COMPLIANT", result.message);
    assert.deepEqual(
      [...new Set(result.items.map((i) => i.schemaId))],
      dirs.map((d) => `${d}/svc_policies.json`),
    );
    assert.equal(await exists(node, "/etc/opt/edge"), false, "Edge is another type");
  },
);

nodeTest("Edge: /etc/opt/edge/policies/managed/svc_policies.json when Edge is installed", {
  make: () => tempNode({ firefox: false, original: null }),
}, async (node) => {
  await install(node, "/opt/microsoft/msedge");
  const reports = await sync(node, [
    cached("Edge", { TrackingPrevention: 3, HubsSidebarEnabled: false }, { id: "e" }),
  ]);
  assert.deepEqual(await readJson(node, "/etc/opt/edge/policies/managed/svc_policies.json"), {
    HubsSidebarEnabled: false,
    TrackingPrevention: 3,
  });
  assert.equal(reports.get("e")?.status, "COMPLIANT", reports.get("e")!.message);
});

nodeTest("nothing installed → INAPPLICABLE naming what was looked for, nothing written", {
  make: () => tempNode({ firefox: false, original: null }),
}, async (node) => {
  const reports = await sync(node, [
    cached("Thunderbird", { DisableTelemetry: true }, { id: "tb" }),
    cached("Chrome", { HomepageLocation: "https://a.example/" }, { id: "c" }),
    cached("Edge", { TrackingPrevention: 1 }, { id: "e" }),
    cached("Firefox", { DisableTelemetry: true }, { id: "f" }),
  ]);
  assert.match(
    reports.get("tb")!.message,
    /^Thunderbird is not installed \(looked for \/usr\/lib\/thunderbird/,
  );
  assert.match(
    reports.get("c")!.message,
    /^Chrome or Chromium is not installed \(looked for \/opt\/google\/chrome/,
  );
  assert.match(reports.get("e")!.message, /^Microsoft Edge is not installed/);
  assert.match(reports.get("f")!.message, /^Firefox is not installed/);
  for (const id of ["tb", "c", "e", "f"]) assert.equal(reports.get(id)?.status, "INAPPLICABLE", id);
  assert.equal(await exists(node, "/etc"), false);
});

nodeTest("an empty cache removes svc's files and leaves other managed files alone", {
  make: () => tempNode({ firefox: false, original: null }),
}, async (node) => {
  await install(node, "/usr/lib/chromium", "/opt/microsoft/msedge");
  await Deno.mkdir(`${node.root}${CHROMIUM_DIR}`, { recursive: true });
  await Deno.writeTextFile(`${node.root}${CHROMIUM_DIR}/vendor.json`, '{"BookmarkBarEnabled": true}');
  const { engine } = await engineFor(node);
  for (
    const p of [
      cached("Chrome", { SyncDisabled: true }, { id: "c" }),
      cached("Edge", { SyncDisabled: true }, { id: "e" }),
    ]
  ) {
    engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: false });
  }
  engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();
  assert.ok(await exists(node, CHROMIUM_FILE));
  assert.ok(await exists(node, "/etc/opt/edge/policies/managed/svc_policies.json"));
  engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();
  assert.equal(await exists(node, CHROMIUM_FILE), false);
  assert.equal(await exists(node, "/etc/opt/edge/policies/managed/svc_policies.json"), false);
  assert.equal(
    await Deno.readTextFile(`${node.root}${CHROMIUM_DIR}/vendor.json`),
    '{"BookmarkBarEnabled": true}',
  );
});

interface Scenario {
  type: string;
  install: string[];
  file: string;
  /** Reads the policy object out of the file. */
  policies(file: Record<string, unknown>): Record<string, unknown>;
  pool: CachedPolicy[];
  /** The documented outcome of merging the whole pool. */
  expected: Record<string, unknown>;
}

const mozilla = (file: Record<string, unknown>) => file.policies as Record<string, unknown>;
const plain = (file: Record<string, unknown>) => file;

const SCENARIOS: Scenario[] = [
  {
    type: "Firefox",
    install: ["/usr/lib/firefox"],
    file: "/etc/firefox/policies/policies.json",
    policies: mozilla,
    pool: [
      cached("Firefox", { DisableTelemetry: false, WebsiteFilter: { Block: ["*://a.example/*"] } }, {
        id: "p1",
        priority: 5,
      }),
      cached("Firefox", { DisableTelemetry: true, WebsiteFilter: { Block: ["*://b.example/*"] } }, {
        id: "p2",
        priority: 5,
      }),
      cached("Firefox", { DisplayMenuBar: "never", Preferences: { "a.b": { Value: 1 } } }, {
        id: "p3",
        priority: 9,
      }),
      cached("Firefox", {
        DisplayMenuBar: "always",
        Preferences: { "a.b": { Value: 2 }, "c.d": { Value: 3 } },
      }, {
        id: "p4",
        priority: 1,
      }),
    ],
    expected: {
      DisableTelemetry: false,
      DisplayMenuBar: "never",
      Preferences: { "a.b": { Value: 1 }, "c.d": { Value: 3 } },
      WebsiteFilter: { Block: ["*://a.example/*", "*://b.example/*"] },
    },
  },
  {
    type: "Thunderbird",
    install: ["/usr/lib/thunderbird"],
    file: "/etc/thunderbird/policies/policies.json",
    policies: mozilla,
    pool: [
      cached(
        "Thunderbird",
        { SSLVersionMin: "tls1.2", Extensions: { Install: ["https://x.example/a.xpi"] } },
        {
          id: "t-b",
          priority: 0,
        },
      ),
      cached(
        "Thunderbird",
        { SSLVersionMin: "tls1.3", Extensions: { Install: ["https://x.example/b.xpi"] } },
        {
          id: "t-a",
          priority: 0,
        },
      ),
      cached("Thunderbird", { PasswordManagerEnabled: false }, { id: "t-c", priority: -3 }),
    ],
    expected: {
      Extensions: { Install: ["https://x.example/b.xpi", "https://x.example/a.xpi"] },
      PasswordManagerEnabled: false,
      SSLVersionMin: "tls1.3",
    },
  },
  {
    type: "Chrome",
    install: ["/usr/lib/chromium"],
    file: CHROMIUM_FILE,
    policies: plain,
    pool: [
      cached("Chrome", {
        URLBlocklist: ["a.example", "shared.example"],
        ExtensionInstallForcelist: ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa;https://low.example/u.xml"],
        BrowserSignin: 0,
      }, { id: "low", priority: 1 }),
      cached("Chrome", {
        URLBlocklist: ["shared.example", "b.example"],
        ExtensionInstallForcelist: ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"],
        BrowserSignin: 2,
      }, { id: "high", priority: 7 }),
      cached("Chrome", { HomepageLocation: "https://z.example/" }, { id: "z", priority: 3 }),
      cached("Chrome", { HomepageLocation: "https://y.example/" }, { id: "y", priority: 3 }),
    ],
    expected: {
      BrowserSignin: 2,
      ExtensionInstallForcelist: ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"],
      HomepageLocation: "https://y.example/",
      URLBlocklist: ["shared.example", "b.example", "a.example"],
    },
  },
  {
    type: "Edge",
    install: ["/opt/microsoft/msedge"],
    file: "/etc/opt/edge/policies/managed/svc_policies.json",
    policies: plain,
    pool: [
      cached(
        "Edge",
        { TrackingPrevention: 1, ExtensionSettings: { "*": { installation_mode: "blocked" } } },
        {
          id: "e1",
          priority: 2,
        },
      ),
      cached("Edge", {
        TrackingPrevention: 3,
        ExtensionSettings: {
          "*": { installation_mode: "allowed" },
          "cccccccccccccccccccccccccccccccc": {
            installation_mode: "force_installed",
            update_url: "https://u.example/x",
          },
        },
      }, { id: "e2", priority: 4 }),
    ],
    expected: {
      ExtensionSettings: {
        "*": { installation_mode: "allowed" },
        "cccccccccccccccccccccccccccccccc": {
          installation_mode: "force_installed",
          update_url: "https://u.example/x",
        },
      },
      TrackingPrevention: 3,
    },
  },
];

for (const scenario of SCENARIOS) {
  Deno.test(`${scenario.type}: conflicting policies give the documented winner for every cache order (property)`, async () => {
    const node = await tempNode({ firefox: false, original: null });
    try {
      await install(node, ...scenario.install);
      let first: string | undefined;
      await fc.assert(
        fc.asyncProperty(
          fc.shuffledSubarray(scenario.pool, {
            minLength: scenario.pool.length,
            maxLength: scenario.pool.length,
          }),
          async (order) => {
            await sync(node, order);
            const text = await Deno.readTextFile(`${node.root}${scenario.file}`);
            first ??= text;
            assert.equal(text, first, "the same bytes for every order");
            assert.deepEqual(scenario.policies(JSON.parse(text)), scenario.expected);
          },
        ),
        { numRuns: 12 },
      );
    } finally {
      await node.cleanup();
    }
  });
}

nodeTest("each policy is reported against its own values; lost keys are INAPPLICABLE naming the winner", {
  make: () => tempNode({ firefox: false, original: null }),
}, async (node) => {
  await install(node, "/usr/lib/chromium");
  const scenario = SCENARIOS.find((s) => s.type === "Chrome")!;
  const reports = await sync(node, scenario.pool);
  assert.deepEqual(itemsByKey(reports.get("low")), {
    BrowserSignin: "INAPPLICABLE",
    ExtensionInstallForcelist: "INAPPLICABLE",
    URLBlocklist: "COMPLIANT",
  });
  assert.equal(reports.get("low")?.status, "COMPLIANT");
  const low = reports.get("low")!.items;
  assert.match(low[0].message, /overridden by higher-priority policy "high" \(high, priority 7\)/);
  assert.match(low[1].message, /every entry is given differently by higher-priority policy "high"/);
  assert.deepEqual(itemsByKey(reports.get("z")), { HomepageLocation: "INAPPLICABLE" });
  assert.equal(reports.get("z")?.status, "INAPPLICABLE");
  assert.match(reports.get("z")!.message, /overridden by higher-priority policy "y" \(y, priority 3\)/);
  assert.equal(reports.get("high")?.status, "COMPLIANT");
  assert.equal(reports.get("y")?.status, "COMPLIANT");
});

nodeTest(
  "Chromium: a managed file sorting after svc_policies.json overrides keys → NON_COMPLIANT naming it",
  { make: () => tempNode({ firefox: false, original: null }) },
  async (node) => {
    await install(node, "/usr/lib/chromium");
    const dir = `${node.root}${CHROMIUM_DIR}`;
    await Deno.mkdir(dir, { recursive: true });
    await Deno.writeTextFile(`${dir}/zz_local.json`, '{"BrowserSignin": 1, "SyncDisabled": true}');
    await Deno.writeTextFile(`${dir}/zzz_broken.json`, "{not json");
    await Deno.writeTextFile(`${dir}/00_early.json`, '{"HomepageLocation": "https://early.example/"}');
    await Deno.mkdir(`${dir}/zz_directory.json`);
    const reports = await sync(node, [
      cached("Chrome", { BrowserSignin: 0, SyncDisabled: true, HomepageLocation: "https://svc.example/" }, {
        id: "c",
      }),
    ]);
    const result = reports.get("c")!;
    assert.equal(result.status, "NON_COMPLIANT");
    assert.deepEqual(itemsByKey(result), {
      BrowserSignin: "NON_COMPLIANT",
      HomepageLocation: "COMPLIANT",
      SyncDisabled: "COMPLIANT",
    });
    assert.match(
      result.items[0].message,
      /overridden by \/etc\/chromium\/policies\/managed\/zz_local.json, which sorts after svc_policies.json; Chromium uses the value of the last file/,
    );
    assert.match(result.message, /1 of 3 setting\(s\) not in effect: BrowserSignin/);
  },
);

nodeTest("Chrome-only settings are not written for Chromium (INAPPLICABLE there) but are for Google Chrome", {
  make: () => tempNode({ firefox: false, original: null }),
}, async (node) => {
  await install(node, "/usr/lib/chromium", "/opt/google/chrome");
  const def: BrowserTypeDef = {
    ...chromeType,
    fieldInfo: {
      ...chromeType.fieldInfo,
      MetricsReportingEnabled: { ...chromeType.fieldInfo.MetricsReportingEnabled, chromeOnly: true },
    },
  };
  const enforcer = chromiumEnforcer(def, "Chrome or Chromium", CHROME_BROWSERS);
  const { engine, reports } = await engineFor(node, { enforcers: enforcerRegistry([enforcer]) });
  engine.handleEvent({
    kind: "SNAPSHOT",
    policy: cached("Chrome", { MetricsReportingEnabled: false, SyncDisabled: true }, { id: "c" }),
    snapshotComplete: true,
  });
  await engine.idle();
  assert.deepEqual(await readJson(node, CHROMIUM_FILE), { SyncDisabled: true });
  assert.deepEqual(await readJson(node, "/etc/opt/chrome/policies/managed/svc_policies.json"), {
    MetricsReportingEnabled: false,
    SyncDisabled: true,
  });
  const result = reports.get("c")!;
  assert.equal(result.status, "COMPLIANT", result.message);
  assert.deepEqual(itemsByKey(result, CHROMIUM_FILE), {
    MetricsReportingEnabled: "INAPPLICABLE",
    SyncDisabled: "COMPLIANT",
  });
  assert.match(
    result.items.find((i) => i.schemaId === CHROMIUM_FILE && i.key === "MetricsReportingEnabled")!.message,
    /Google Chrome policy that Chromium does not support/,
  );
});

nodeTest(
  "hostile content fed straight to the Thunderbird, Chrome and Edge enforcers never reaches the disk",
  { make: () => tempNode({ firefox: false, original: null }) },
  async (node) => {
    await install(node, "/usr/lib/thunderbird", "/usr/lib/chromium", "/opt/microsoft/msedge");
    let deep: unknown = "x";
    for (let i = 0; i < 100; i++) deep = [deep];
    const hostile: CachedPolicy[] = [];
    for (const type of ["Thunderbird", "Chrome", "Edge"]) {
      const raw = (id: string, content: string): CachedPolicy => ({
        id: `${type}-${id}`,
        name: id,
        type,
        version: 1,
        priority: 99,
        content,
      });
      for (const [i, key] of ["../../etc/cron.d/x", "a/b", "Key\nInjected", "Key\u0000Nul", ".."].entries()) {
        hostile.push(raw(`key${i}`, JSON.stringify({ additional: { [key]: "pwned" } })));
      }
      hostile.push(raw("big", JSON.stringify({ additional: { Big: "p".repeat(10 * 1024 * 1024) } })));
      hostile.push(raw("deep", JSON.stringify({ additional: { Deep: deep } })));
      hostile.push(raw("ctl", JSON.stringify({ additional: { Ctl: "pwned\u001b[2J" } })));
    }
    hostile.push({
      ...cached("Chrome", { HomepageLocation: "javascript:alert('pwned')" }, { id: "Chrome-url" }),
    });
    hostile.push({ ...cached("Edge", { URLBlocklist: ['pwned"><'] }, { id: "Edge-pattern" }) });
    // A typed message of another type is not trusted either: the content is used.
    const mismatched = { ...cached("Chrome", { SyncDisabled: true }, { id: "Chrome-mismatch" }) };
    mismatched.typed = typedContentFor("Edge", JSON.stringify({ TrackingPrevention: 3 }))!.value;
    const reports = await sync(node, [...hostile, mismatched]);
    for (const p of hostile) {
      assert.equal(reports.get(p.id)?.status, "ERROR", `${p.id}: ${reports.get(p.id)?.message}`);
      assert.match(reports.get(p.id)!.message, /rejected by the agent/);
    }
    assert.equal(reports.get("Chrome-mismatch")?.status, "COMPLIANT");
    assert.deepEqual(await readJson(node, CHROMIUM_FILE), { SyncDisabled: true });
    assert.equal(await exists(node, "/etc/thunderbird"), false);
    assert.equal(await exists(node, "/etc/opt/edge"), false);
    const written = await Deno.readTextFile(`${node.root}${CHROMIUM_FILE}`);
    assert.doesNotMatch(written, /pwned|cron|Injected/);
  },
);
