/** Chrome and Chromium: the managed-policy JSON Chrome reads; merged by priority on the node. */
import { type ChromePolicy, ChromePolicySchema } from "../gen/svc/policy/v1/chrome_pb.ts";
import { type BrowserRules, checkBrowserPolicy } from "./browser.ts";
import { defineType } from "./define.ts";

const WEB = ["http", "https"];
const CONTENT_SETTING = [1, 2, 3, 4];

/** Documented enumerations and URL fields of the curated Chrome settings. */
export const CHROME_RULES: BrowserRules = {
  enums: {
    RestoreOnStartup: [1, 4, 5],
    ForceYouTubeRestrict: [0, 1, 2],
    SafeBrowsingProtectionLevel: [0, 1, 2],
    SSLVersionMin: ["tls1.2", "tls1.3"],
    HttpsOnlyMode: ["allowed", "disallowed", "force_enabled"],
    BrowserSignin: [0, 1, 2],
    IncognitoModeAvailability: [0, 1, 2],
    NetworkPredictionOptions: [0, 1, 2],
    DefaultCookiesSetting: CONTENT_SETTING,
    DefaultJavaScriptSetting: CONTENT_SETTING,
    DefaultPopupsSetting: CONTENT_SETTING,
    DefaultNotificationsSetting: CONTENT_SETTING,
    DefaultGeolocationSetting: CONTENT_SETTING,
    DownloadRestrictions: [0, 1, 2, 3, 4],
    DeveloperToolsAvailability: [0, 1, 2],
    RelaunchNotification: [1, 2],
    ProxyMode: ["direct", "auto_detect", "pac_script", "fixed_servers", "system"],
    DnsOverHttpsMode: ["off", "automatic", "secure"],
    "ExtensionSettings.*.installation_mode": [
      "allowed",
      "blocked",
      "force_installed",
      "normal_installed",
      "removed",
    ],
    "ExtensionSettings.*.toolbar_pin": ["force_pinned", "default_unpinned"],
  },
  urls: {
    HomepageLocation: WEB,
    NewTabPageLocation: WEB,
    "RestoreOnStartupURLs[]": WEB,
    DefaultSearchProviderSearchURL: WEB,
    DefaultSearchProviderSuggestURL: WEB,
    ProxyPacUrl: ["http", "https", "file"],
    "ExtensionSettings.*.update_url": WEB,
  },
};

/** The Chrome policy type. */
export const chromeType = defineType<ChromePolicy>({
  wireName: "Chrome",
  schema: ChromePolicySchema,
  typedContentCase: "chromePolicy",
  merge: "priority_merge",
  names: "json",
  check: (message, issues) => checkBrowserPolicy(ChromePolicySchema, message, CHROME_RULES, issues),
});
