/**
 * The Chrome enforcer against Debian's real Chromium (policy loader in a private mount namespace, see
 * tests/helpers/chromium_policy.ts; binary /usr/lib/chromium/chromium):
 *
 * - the file the enforcer writes loads without error for every typed key it wrote;
 * - a managed file sorting after svc's wins a key in the real loader, and the enforcer reports that key
 *   NON_COMPLIANT naming the file;
 * - the enforcer's "unknown policy" check (policy names found in the browser binary) agrees with the loader;
 * - catalogue check: every curated Chrome key except those marked chromeOnly or deprecated is known to this
 *   Chromium, with a sample value that passes the shared validation and Chromium's own schema.
 *
 * Where Chromium or namespaces are missing the tests log "skipped: <reason>" and pass, unless
 * SVC_REQUIRE_CHROMIUM_LOADER=1 (CI) makes a skip a failure.
 */
import assert from "node:assert/strict";
import type { DescField } from "@bufbuild/protobuf";
import { typedContentFor, validatePolicyContent } from "../../shared/policy_types/mod.ts";
import { chromeType } from "../../shared/policy_types/chrome.ts";
import type { FieldInfo } from "../../shared/policy_types/browser.ts";
import { CHROMIUM_FILE_NAME } from "../../agent/enforcers/chromium.ts";
import { chromiumKnownPolicies } from "../../agent/enforcers/known_policies.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { Runner } from "../../agent/runner.ts";
import type { CachedPolicy, EnforcerIO } from "../../agent/sync/types.ts";
import { type ChromiumPolicyRecord, loadPoliciesWithRealChromium } from "../helpers/chromium_policy.ts";
import { engineFor, type TempNode, tempNode } from "./helpers.ts";

const REQUIRED = Deno.env.get("SVC_REQUIRE_CHROMIUM_LOADER") === "1";
const CHROMIUM_BINARY = "/usr/lib/chromium/chromium";
const MANAGED = "/etc/chromium/policies/managed";

function skip(reason: string): void {
  if (REQUIRED) throw new Error(`SVC_REQUIRE_CHROMIUM_LOADER=1 but the check skipped: ${reason}`);
  console.log(`skipped: ${reason}`);
}

function chromePolicy(content: Record<string, unknown>, id: string): CachedPolicy {
  const text = JSON.stringify(content);
  return {
    id,
    name: id,
    type: "Chrome",
    version: 1,
    priority: 0,
    content: text,
    typed: typedContentFor("Chrome", text)?.value,
  };
}

/** A node with Chromium "installed": the real binary hard-linked (or copied) into the temp root. */
async function chromiumNode(): Promise<TempNode | undefined> {
  if (!await Deno.stat(CHROMIUM_BINARY).then((i) => i.isFile, () => false)) return undefined;
  const node = await tempNode({ firefox: false, original: null });
  await Deno.mkdir(`${node.root}/usr/lib/chromium`, { recursive: true });
  const target = `${node.root}${CHROMIUM_BINARY}`;
  await Deno.link(CHROMIUM_BINARY, target).catch(() => Deno.copyFile(CHROMIUM_BINARY, target));
  return node;
}

Deno.test("real Chromium loads the enforcer's file; a later file wins as reported; the unknown-key check agrees", async () => {
  const node = await chromiumNode();
  if (!node) return skip(`${CHROMIUM_BINARY} not found (install it: apt-get install -y chromium)`);
  try {
    const dir = `${node.root}${MANAGED}`;
    await Deno.mkdir(dir, { recursive: true });
    await Deno.writeTextFile(`${dir}/zz_local.json`, JSON.stringify({ BrowserSignin: 1 }));
    const content = {
      HomepageLocation: "https://intranet.example/",
      RestoreOnStartup: 4,
      RestoreOnStartupURLs: ["https://intranet.example/start"],
      BookmarkBarEnabled: true,
      ManagedBookmarks: [{ toplevel_name: "Company" }, { name: "Wiki", url: "https://wiki.example/" }],
      ExtensionInstallForcelist: [
        "cjpalhdlnbpafiamejdnhcphjbkeiagm;https://clients2.google.com/service/update2/crx",
      ],
      ExtensionInstallBlocklist: ["*"],
      ExtensionSettings: {
        "*": { installation_mode: "blocked", blocked_install_message: "Ask IT" },
        "cjpalhdlnbpafiamejdnhcphjbkeiagm": {
          installation_mode: "force_installed",
          update_url: "https://clients2.google.com/service/update2/crx",
          toolbar_pin: "force_pinned",
        },
      },
      URLBlocklist: ["example.org", ".ads.example"],
      URLAllowlist: ["intranet.example"],
      SafeBrowsingProtectionLevel: 2,
      BrowserSignin: 0,
      IncognitoModeAvailability: 1,
      DefaultCookiesSetting: 4,
      CookiesAllowedForUrls: ["[*.]intranet.example"],
      DownloadRestrictions: 1,
      RelaunchNotificationPeriod: 86_400_000,
      AuthSchemes: "negotiate,ntlm",
      AuthServerAllowlist: "*.intranet.example",
      ProxyMode: "system",
      DnsOverHttpsMode: "secure",
      DnsOverHttpsTemplates: "https://dns.example/dns-query{?dns}",
      AutoSelectCertificateForUrls: ['{"pattern":"https://[*.]intranet.example","filter":{}}'],
      additional: { BrowserLabsEnabled: false, NotARealPolicy: true },
    };
    const { engine, reports } = await engineFor(node);
    engine.handleEvent({ kind: "SNAPSHOT", policy: chromePolicy(content, "c"), snapshotComplete: true });
    await engine.idle();
    const written = JSON.parse(await Deno.readTextFile(`${dir}/${CHROMIUM_FILE_NAME}`)) as Record<
      string,
      unknown
    >;
    const result = reports.get("c")!;
    const status = Object.fromEntries(result.items.map((i) => [i.key, i]));
    assert.equal(result.status, "NON_COMPLIANT");
    assert.equal(status.BrowserSignin.status, "NON_COMPLIANT");
    assert.match(
      status.BrowserSignin.message,
      /overridden by \/etc\/chromium\/policies\/managed\/zz_local.json/,
    );
    assert.equal(status.NotARealPolicy.status, "NON_COMPLIANT");
    assert.match(
      status.NotARealPolicy.message,
      /^Chromium \(\/usr\/lib\/chromium\/chromium\) does not know the policy NotARealPolicy and ignores it$/,
    );
    const compliant = new Set(
      result.items.filter((i) => i.status === "COMPLIANT").map((i) => i.key.split(".")[0]),
    );
    assert.deepEqual(
      [...compliant].sort(),
      Object.keys(written).filter((k) => k !== "BrowserSignin" && k !== "NotARealPolicy").sort(),
    );

    const loaded = await loadPoliciesWithRealChromium(dir);
    if (!loaded.ok) return skip(loaded.skipReason);
    for (const key of Object.keys(written)) {
      const record: ChromiumPolicyRecord | undefined = loaded.policies[key];
      assert.ok(record, `${key} missing from chrome://policy`);
      if (key === "NotARealPolicy") {
        assert.equal(record.error, "Unknown policy.");
        continue;
      }
      assert.equal(record.error, undefined, `${key}: ${record.error}`);
      assert.deepEqual(record.value, key === "BrowserSignin" ? 1 : written[key], key);
    }
    // The enforcer's binary check says "unknown" exactly where the loader does.
    const io = { fs: node.fs, runner: new Runner(), logger: SILENT_LOGGER } as unknown as EnforcerIO;
    const known = await chromiumKnownPolicies(io, CHROMIUM_BINARY, "Chromium", Object.keys(written));
    assert.ok(known, "the binary is readable");
    for (const key of Object.keys(written)) {
      assert.equal(known.knows(key), loaded.policies[key].error !== "Unknown policy.", key);
    }
  } finally {
    await node.cleanup();
  }
});

/** A value for a curated setting that the shared validation accepts. */
function sample(path: string, field: DescField, info: FieldInfo): unknown {
  // Values that keep Chromium from reporting conflicts between the samples (see the cross checks of the
  // Chrome catalogue): session-only cookies need a RestoreOnStartup other than 1, DoH templates a mode.
  const chosen: Record<string, unknown> = { RestoreOnStartup: 5, DnsOverHttpsMode: "secure" };
  if (path in chosen) return chosen[path];
  const one = (): unknown => {
    if (info.enum) {
      return info.format === "comma_list" ? info.enum.map((o) => o.value).join(",") : info.enum[0].value;
    }
    if (info.min !== undefined) return info.min;
    const formats: Record<string, unknown> = {
      url: "https://intranet.example/",
      search_url: "https://search.example/?q={searchTerms}",
      url_filter: "example.com",
      url_pattern: "[*.]example.com",
      match_pattern: "https://extensions.example/*",
      extension_id: "cjpalhdlnbpafiamejdnhcphjbkeiagm",
      extension_id_or_star: "*",
      extension_forcelist_entry: "cjpalhdlnbpafiamejdnhcphjbkeiagm",
      domain: "intranet.example",
      host_list: "*.intranet.example",
      locale: "en-US",
      directory: "/srv/downloads",
      regex: ".*@example\\.com",
      json_object: '{"pattern":"https://[*.]example.com","filter":{}}',
      doh_templates: "https://dns.example/dns-query{?dns}",
    };
    if (info.format) return formats[info.format];
    const scalar = field.fieldKind === "scalar" || field.fieldKind === "list" ? field.scalar : undefined;
    if (scalar === 8) return true;
    if (scalar === 9) {
      return { ProxyServer: "proxy.example:3128", ProxyBypassList: "localhost" }[path] ?? "Intranet";
    }
    throw new Error(`no sample for ${path}`);
  };
  if (path === "ManagedBookmarks") {
    return [{ toplevel_name: "Company" }, { name: "Wiki", url: "https://wiki.example/" }];
  }
  if (path === "ExtensionSettings") return { "*": { installation_mode: "allowed" } };
  return field.fieldKind === "list" ? [one()] : one();
}

Deno.test("catalogue check: every curated Chrome key is known to this Chromium and accepts its sample value", async () => {
  const skipped: string[] = [];
  const content: Record<string, unknown> = {};
  for (const field of chromeType.schema.fields) {
    const info = chromeType.fieldInfo[field.jsonName];
    if (!info) continue; // additional
    if (info.chromeOnly || info.deprecated) {
      skipped.push(field.jsonName);
      continue;
    }
    content[field.jsonName] = sample(field.jsonName, field, info);
  }
  assert.deepEqual(
    validatePolicyContent("Chrome", JSON.stringify(content)),
    [],
    "samples pass the shared validation",
  );
  const dir = await Deno.makeTempDir({ prefix: "svc-chrome-catalogue-" });
  try {
    await Deno.writeTextFile(`${dir}/${CHROMIUM_FILE_NAME}`, JSON.stringify(content));
    const loaded = await loadPoliciesWithRealChromium(dir);
    if (!loaded.ok) return skip(loaded.skipReason);
    const problems = Object.keys(content)
      .map((key): [string, ChromiumPolicyRecord | undefined] => [key, loaded.policies[key]])
      .filter(([, record]) => !record || record.error !== undefined)
      .map(([key, record]) => `${key}: ${record?.error ?? "missing"}`);
    assert.deepEqual(problems, [], "curated keys Chromium does not accept");
    console.log(`excluded from the check (chromeOnly or deprecated): ${skipped.join(", ")}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
